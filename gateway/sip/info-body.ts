/**
 * What a SIP INFO body says, pure: DTMF in application/dtmf-relay (`Signal=5` / `Duration=160`
 * lines) or application/dtmf (the digit alone), or any other content passed on as it came. Both
 * drivers answer INFO from this one reading: `invalid` is answered 400, the rest 200.
 *
 * The body comes from the network, so it is read line by line in one pass (no regular
 * expression that can backtrack over a hostile body) and a DTMF body longer than any real one is
 * refused before it is looked at.
 */

export type InfoBody =
  | { readonly type: 'dtmf'; readonly digit: string; readonly durationMs?: number }
  | { readonly type: 'info'; readonly contentType: string; readonly body: string }
  | { readonly type: 'invalid'; readonly reason: string };

/**
 * A real dtmf-relay body is two short lines (about 25 bytes); 256 leaves room for extra fields
 * some PBXs add, and keeps a hostile body from being scanned.
 */
export const MAX_DTMF_BODY_BYTES = 256;

/**
 * Longest key press reported as a duration: a held key is still one digit, a larger value is a
 * broken or hostile peer, and the digit is reported without it.
 */
export const MAX_DTMF_DURATION_MS = 60_000;

const DIGITS: ReadonlySet<string> = new Set([
  '0',
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '*',
  '#',
  'A',
  'B',
  'C',
  'D',
]);
/** RFC 4733 event codes 10-15, which some gateways put in Signal= instead of the character. */
const EVENT_CODES: Readonly<Record<string, string>> = {
  '10': '*',
  '11': '#',
  '12': 'A',
  '13': 'B',
  '14': 'C',
  '15': 'D',
};

/** The media type of a Content-Type value, lower-cased, without parameters. */
export function mediaType(contentType: string): string {
  return (contentType.split(';')[0] ?? '').trim().toLowerCase();
}

function digitOf(text: string): string | undefined {
  const upper = text.toUpperCase();
  if (DIGITS.has(upper)) return upper;
  return EVENT_CODES[text];
}

export function parseInfoBody(contentType: string, body: string): InfoBody {
  const type = mediaType(contentType);
  if (type === 'application/dtmf-relay') return parseDtmfRelay(body);
  if (type === 'application/dtmf') {
    if (body.length > MAX_DTMF_BODY_BYTES) return { type: 'invalid', reason: 'DTMF body too long' };
    const digit = digitOf(body.trim());
    return digit === undefined
      ? { type: 'invalid', reason: 'Bad DTMF Signal' }
      : { type: 'dtmf', digit };
  }
  return { type: 'info', contentType: type, body };
}

function parseDtmfRelay(body: string): InfoBody {
  if (body.length > MAX_DTMF_BODY_BYTES) return { type: 'invalid', reason: 'DTMF body too long' };
  let signal: string | undefined;
  let duration: string | undefined;
  for (const line of body.split('\n')) {
    const equals = line.indexOf('=');
    if (equals < 0) {
      if (line.trim().length === 0) continue;
      return { type: 'invalid', reason: 'Bad DTMF Body' };
    }
    const key = line.slice(0, equals).trim().toLowerCase();
    const value = line.slice(equals + 1).trim();
    if (key === 'signal') {
      // Two Signal lines name two digits in one INFO, which no sender means: refuse rather than guess.
      if (signal !== undefined) return { type: 'invalid', reason: 'Bad DTMF Signal' };
      signal = value;
    } else if (key === 'duration') {
      if (duration !== undefined) return { type: 'invalid', reason: 'Bad DTMF Body' };
      duration = value;
    }
  }
  const digit = signal === undefined ? undefined : digitOf(signal);
  if (digit === undefined) return { type: 'invalid', reason: 'Bad DTMF Signal' };
  const durationMs =
    duration !== undefined && /^\d{1,6}$/.test(duration) ? Number(duration) : undefined;
  if (durationMs === undefined || durationMs === 0 || durationMs > MAX_DTMF_DURATION_MS)
    return { type: 'dtmf', digit };
  return { type: 'dtmf', digit, durationMs };
}
