/**
 * The pieces of a delayed-offer call (an INVITE without SDP) both drivers share, pure: what the
 * application is told when it accepts (before the answer exists), the answer read from the ACK
 * and checked against callgate's offer, and the Reason header of the BYE that ends a call whose
 * ACK had no usable answer (RFC 3261 section 13.3.1.4, RFC 3326).
 */
import { acceptAnswer, DEFAULT_PTIME_MS, type NegotiatedMedia } from './sdp-negotiation.ts';
import { parseSdp } from './sdp-parser.ts';
import { provisionalSrtp } from './sdp-srtp.ts';
import type { SdpSession } from './sdp-types.ts';

/** The RTP port reported before the caller's answer names one (RFC 863 discard, as RFC 8840 uses it). */
export const DISCARD_PORT = 9;

/**
 * What `accept` reports at once for a delayed offer: callgate's first codec and the caller's
 * signaling address with the discard port, so RTP sent before the ACK is lost, not misdirected.
 */
export function provisionalMedia(offer: SdpSession, callerAddress: string): NegotiatedMedia {
  const audio = offer.media[0];
  const first = audio?.rtpmaps[0];
  const dtmf = audio?.rtpmaps.find(
    (map) => map.encoding === 'telephone-event' && map.clockRate === first?.clockRate,
  );
  const codec = provisionalCodec(first?.encoding);
  const srtp = provisionalSrtp(audio);
  return {
    codec,
    payloadType: first?.payloadType ?? 0,
    clockRate: first?.clockRate ?? 8000,
    channels: first?.channels ?? 1,
    ...(dtmf !== undefined
      ? { telephoneEvent: { payloadType: dtmf.payloadType, clockRate: dtmf.clockRate } }
      : {}),
    ptime: audio?.ptime ?? DEFAULT_PTIME_MS,
    remote: { address: callerAddress, port: DISCARD_PORT },
    direction: 'sendrecv',
    held: false,
    ...(srtp !== undefined && { srtp }),
  };
}

function provisionalCodec(encoding: string | undefined): NegotiatedMedia['codec'] {
  if (encoding === 'opus' || encoding === 'PCMA' || encoding === 'G722') return encoding;
  return 'PCMU';
}

export type AckAnswer =
  | { readonly ok: true; readonly media: NegotiatedMedia }
  | { readonly ok: false; readonly detail: string };

/** The answer an ACK (its Content-Type and body) carries for callgate's offer, checked against that offer. */
export function readAckAnswer(
  contentType: string | undefined,
  body: string,
  offer: SdpSession,
): AckAnswer {
  if (body.length === 0) return { ok: false, detail: 'the ACK carried no SDP answer' };
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type !== 'application/sdp')
    return {
      ok: false,
      detail: `the ACK body is ${type === '' ? 'untyped' : type}, not application/sdp`,
    };
  const sdp = parseSdp(body);
  if (!sdp.ok) return { ok: false, detail: `bad SDP in the ACK: ${sdp.reason}` };
  const settled = acceptAnswer(offer, sdp.value);
  return settled.ok ? settled : { ok: false, detail: settled.detail };
}

/** Longest text put in the Reason header: enough to say what was wrong, not a copy of the SDP. */
const MAX_REASON_TEXT = 120;

/** The Reason header value (RFC 3326) of the BYE that ends a call whose ACK had no usable answer. */
export function unusableAnswerReason(detail: string): string {
  let text = '';
  for (const char of detail.slice(0, MAX_REASON_TEXT)) {
    const code = char.charCodeAt(0);
    // Inside a quoted-string: no quote, backslash or control character.
    text += char === '"' || char === '\\' || code < 0x20 || code === 0x7f ? ' ' : char;
  }
  return `SIP ;cause=488 ;text="${text}"`;
}
