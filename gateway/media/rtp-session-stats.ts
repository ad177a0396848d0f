/** Per-call media numbers, reported by RtpSession.stats() and with its `closed` event. */
import type { SrtpDropReason } from './srtp-transform.ts';

export type RtpSessionDropReason =
  | 'truncated'
  | 'too-large'
  | 'bad-version'
  | 'csrc-truncated'
  | 'extension-truncated'
  | 'bad-padding'
  | 'rtcp'
  | 'unknown-payload-type'
  | 'unexpected-source'
  /** From an address the call's signaling and SDP did not name (media-source-policy.ts). */
  | 'refused-source'
  | 'ssrc-probation'
  | 'sequence-jump'
  | 'undecodable'
  | 'rtcp-invalid'
  | SrtpDropReason;

export interface RtpSessionStats {
  readonly packetsIn: number;
  readonly bytesIn: number;
  readonly packetsOut: number;
  readonly bytesOut: number;
  readonly dropped: Readonly<Partial<Record<RtpSessionDropReason, number>>>;
  /** Expected minus received, per RFC 3550 A.3. */
  readonly lost: number;
  readonly jitterMs: number;
  readonly late: number;
  readonly duplicates: number;
  readonly discarded: number;
  /** Caller frames handed to the model ahead of their slot to bring the jitter buffer back to its target. */
  readonly hurried: number;
  readonly concealed: number;
  readonly receiveUnderruns: number;
  readonly jitterDepthMs: number;
  readonly playoutUnderruns: number;
  readonly playoutLatenessMaxMs: number;
  readonly playoutLatenessMeanMs: number;
  readonly playoutSkippedFrames: number;
  /** Model audio refused because MAX_QUEUED_MS was queued already (a model far ahead of real time). */
  readonly modelAudioRefusedMs: number;
  readonly dtmfIn: number;
  readonly dtmfOut: number;
  readonly rtcpIn: number;
  readonly rtcpOut: number;
  readonly ssrcChanges: number;
  readonly relatches: number;
}
