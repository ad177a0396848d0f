/** What an RtpSession tells its call, as one discriminated union with small factories. */
import type { WireCodec } from './audio-format.ts';
import type { PlayoutClearResult } from './playout.ts';
import type { DtmfDigit } from './telephone-event.ts';
import type { RtpSessionStats } from './rtp-session-stats.ts';

export interface RtpEndpoint {
  readonly address: string;
  readonly port: number;
}

export type DigitSource = 'rtp' | 'sip-info';
export type MediaTimeoutReason = 'no-rtp' | 'no-rtp-ever';

export type RtpSessionEvent =
  /** 20 ms of caller audio in the model's format. */
  | { readonly type: 'audio'; readonly audio: Buffer; readonly concealed: boolean }
  | { readonly type: 'dtmf'; readonly digit: DtmfDigit; readonly source: DigitSource }
  /** The key was released: how long it was held, as the sender measured it (RFC 4733 end packet, or the INFO's Duration). */
  | {
      readonly type: 'dtmf-end';
      readonly digit: DtmfDigit;
      readonly durationMs: number;
      readonly source: DigitSource;
    }
  /** Where RTP is sent now: the address the caller's packets come from (symmetric RTP). */
  | { readonly type: 'remote-latched'; readonly remote: RtpEndpoint; readonly ssrc: number }
  | { readonly type: 'ssrc-changed'; readonly previousSsrc: number; readonly ssrc: number }
  /** A re-INVITE changed the wire codec; `sendSsrc` is new when the RTP clock rate changed (RFC 7160). */
  | {
      readonly type: 'codec-changed';
      readonly previous: WireCodec;
      readonly codec: WireCodec;
      readonly sendSsrc: number;
    }
  /** The first frame of a model output item went out: the caller starts hearing it. */
  | { readonly type: 'item-started'; readonly itemId: string }
  /** The last frame of a model output item went out. */
  | { readonly type: 'item-played'; readonly itemId: string; readonly sentMs: number }
  /** The process stalled this long with agent audio queued: it was dropped (rtp.stallCutMs). */
  | {
      readonly type: 'playout-stalled';
      readonly gapMs: number;
      readonly cleared: PlayoutClearResult;
    }
  | {
      readonly type: 'media-timeout';
      readonly reason: MediaTimeoutReason;
      readonly silentMs: number;
    }
  | { readonly type: 'closed'; readonly stats: RtpSessionStats };

export const rtpEvents = {
  playoutStalled: (gapMs: number, cleared: PlayoutClearResult): RtpSessionEvent => ({
    type: 'playout-stalled',
    gapMs,
    cleared,
  }),
  audio: (audio: Buffer, concealed: boolean): RtpSessionEvent => ({
    type: 'audio',
    audio,
    concealed,
  }),
  dtmf: (digit: DtmfDigit, source: DigitSource): RtpSessionEvent => ({
    type: 'dtmf',
    digit,
    source,
  }),
  dtmfEnd: (digit: DtmfDigit, durationMs: number, source: DigitSource): RtpSessionEvent => ({
    type: 'dtmf-end',
    digit,
    durationMs,
    source,
  }),
  remoteLatched: (remote: RtpEndpoint, ssrc: number): RtpSessionEvent => ({
    type: 'remote-latched',
    remote,
    ssrc,
  }),
  ssrcChanged: (previousSsrc: number, ssrc: number): RtpSessionEvent => ({
    type: 'ssrc-changed',
    previousSsrc,
    ssrc,
  }),
  codecChanged: (previous: WireCodec, codec: WireCodec, sendSsrc: number): RtpSessionEvent => ({
    type: 'codec-changed',
    previous,
    codec,
    sendSsrc,
  }),
  itemStarted: (itemId: string): RtpSessionEvent => ({ type: 'item-started', itemId }),
  itemPlayed: (itemId: string, sentMs: number): RtpSessionEvent => ({
    type: 'item-played',
    itemId,
    sentMs,
  }),
  mediaTimeout: (reason: MediaTimeoutReason, silentMs: number): RtpSessionEvent => ({
    type: 'media-timeout',
    reason,
    silentMs,
  }),
  closed: (stats: RtpSessionStats): RtpSessionEvent => ({ type: 'closed', stats }),
};
