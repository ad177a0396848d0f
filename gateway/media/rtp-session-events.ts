/** What an RtpSession tells its call, as one discriminated union with small factories. */
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
  /** Where RTP is sent now: the address the caller's packets come from (symmetric RTP). */
  | { readonly type: 'remote-latched'; readonly remote: RtpEndpoint; readonly ssrc: number }
  | { readonly type: 'ssrc-changed'; readonly previousSsrc: number; readonly ssrc: number }
  /** The last frame of a model output item went out. */
  | { readonly type: 'item-played'; readonly itemId: string; readonly sentMs: number }
  | { readonly type: 'media-timeout'; readonly reason: MediaTimeoutReason; readonly silentMs: number }
  | { readonly type: 'closed'; readonly stats: RtpSessionStats };

export const rtpEvents = {
  audio: (audio: Buffer, concealed: boolean): RtpSessionEvent => ({ type: 'audio', audio, concealed }),
  dtmf: (digit: DtmfDigit, source: DigitSource): RtpSessionEvent => ({ type: 'dtmf', digit, source }),
  remoteLatched: (remote: RtpEndpoint, ssrc: number): RtpSessionEvent => ({ type: 'remote-latched', remote, ssrc }),
  ssrcChanged: (previousSsrc: number, ssrc: number): RtpSessionEvent => ({ type: 'ssrc-changed', previousSsrc, ssrc }),
  itemPlayed: (itemId: string, sentMs: number): RtpSessionEvent => ({ type: 'item-played', itemId, sentMs }),
  mediaTimeout: (reason: MediaTimeoutReason, silentMs: number): RtpSessionEvent => ({ type: 'media-timeout', reason, silentMs }),
  closed: (stats: RtpSessionStats): RtpSessionEvent => ({ type: 'closed', stats }),
};
