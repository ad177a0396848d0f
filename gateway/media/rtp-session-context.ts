/**
 * What the parts of an RtpSession (latching, receive path, send path, RTCP) share: the session's
 * per-call counts, its negotiated codec, where it sends, and its event and drop ports. The
 * RtpSession facade owns and writes these (plain fields: the packet paths read them per packet);
 * its parts read them here rather than each keeping a copy.
 */
import type { Logger } from '../../config/log.ts';
import type { WireCodec } from './audio-format.ts';
import type { RtpEndpoint, RtpSessionEvent } from './rtp-session-events.ts';
import type { RtpSessionDropReason } from './rtp-session-stats.ts';

/** Per-call counters, plain numbers on the hot paths; stats() and the metrics flush read them. */
export interface RtpCounts {
  packetsIn: number;
  bytesIn: number;
  packetsOut: number;
  bytesOut: number;
  dtmfIn: number;
  dtmfOut: number;
  rtcpIn: number;
  rtcpOut: number;
  ssrcChanges: number;
  relatches: number;
  modelAudioRefusedMs: number;
  latenessSum: number;
  latenessMax: number;
  latenessFrames: number;
}

export function newRtpCounts(): RtpCounts {
  return {
    packetsIn: 0,
    bytesIn: 0,
    packetsOut: 0,
    bytesOut: 0,
    dtmfIn: 0,
    dtmfOut: 0,
    rtcpIn: 0,
    rtcpOut: 0,
    ssrcChanges: 0,
    relatches: 0,
    modelAudioRefusedMs: 0,
    latenessSum: 0,
    latenessMax: 0,
    latenessFrames: 0,
  };
}

export interface RtpSessionContext {
  readonly counts: RtpCounts;
  readonly logger: Logger;
  /** The wire codec in use now. */
  readonly codec: WireCodec;
  /** Payload type of telephone-event when negotiated. */
  readonly telephoneEventPayloadType: number | undefined;
  /** Where RTP goes: the SDP address, then the latched source. */
  readonly remote: RtpEndpoint | undefined;
  emit(event: RtpSessionEvent): void;
  drop(reason: RtpSessionDropReason): void;
}
