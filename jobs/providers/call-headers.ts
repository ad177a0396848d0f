/**
 * The call context as HTTP headers for a system of record (docs/http-provider.md):
 *
 *   X-Callgate-Caller           the caller's number or SIP user
 *   X-Callgate-Caller-Verified  true | false: true only for a trusted trunk's asserted identity
 *                               (sent with X-Callgate-Caller, never alone)
 *   X-Callgate-Called           the number dialled
 *   X-Callgate-Session-Id       the call's session id
 *
 * An absent value leaves its header out. A value that is not a plausible number, SIP user or id
 * is left out too: the caller comes from a SIP header anyone can write, and must neither split
 * the HTTP request (CR/LF) nor reach the system of record as something else
 * (test/unit/providers/call-headers.test.ts).
 */
import type { ProviderCallContext } from './provider.ts';

export const CALLER_HEADER = 'X-Callgate-Caller';
export const CALLER_VERIFIED_HEADER = 'X-Callgate-Caller-Verified';
export const CALLED_HEADER = 'X-Callgate-Called';
export const SESSION_ID_HEADER = 'X-Callgate-Session-Id';

/**
 * A number (`+15550123`, `555-0123`, `*21#`) or a SIP user (`alice`, `+15550123;isub=1`): the
 * URI user characters of RFC 3261 unescaped, plus `#` of tel numbers, with a letter or digit in it.
 */
const PLAUSIBLE_USER = /^[A-Za-z0-9\-_.!~*'()&=+$,;?/#]{1,128}$/;
const HAS_ALPHANUMERIC = /[A-Za-z0-9]/;
/** Session ids as admission accepts them (jobs/admission/admission.ts SAFE_ID). */
const PLAUSIBLE_SESSION_ID = /^[A-Za-z0-9_.-]{1,128}$/;

export function callHeaders(call: ProviderCallContext | undefined): Record<string, string> {
  if (call === undefined) return {};
  const headers: Record<string, string> = {};
  if (isPlausibleUser(call.caller)) {
    headers[CALLER_HEADER] = call.caller;
    headers[CALLER_VERIFIED_HEADER] = call.callerVerified === true ? 'true' : 'false';
  }
  if (isPlausibleUser(call.called)) headers[CALLED_HEADER] = call.called;
  if (call.sessionId !== undefined && PLAUSIBLE_SESSION_ID.test(call.sessionId))
    headers[SESSION_ID_HEADER] = call.sessionId;
  return headers;
}

function isPlausibleUser(value: string | undefined): value is string {
  return value !== undefined && PLAUSIBLE_USER.test(value) && HAS_ALPHANUMERIC.test(value);
}
