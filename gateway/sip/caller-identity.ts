/**
 * Who is calling, as callgate believes it. A trunk the tenant trusts to assert identities (RFC 3325
 * `trunk.trustAssertedIdentity`, only allowed with an address allowlist or digest) names the caller
 * in P-Asserted-Identity, and that caller is verified; otherwise the caller is From's user, which
 * anyone can write, so it is never verified. A digest-authenticated trunk alone does not verify the
 * caller: the password proves the trunk, not the number it puts in From.
 *
 * Pure functions over a parsed request (the log is passed in); both drivers call them, so they
 * answer alike. Hostile input yields a reason for ignoring the asserted identity, never an
 * exception (test/unit/sip/caller-identity.test.ts).
 */
import type { Logger } from '../../config/log.ts';
import type { TenantConfig, TrunkConfig } from '../../config/schema.ts';
import { headerValues } from './header-names.ts';
import { parseNameAddr, splitList } from './header-parser.ts';
import { formatUri } from './message-serializer.ts';
import type { NameAddr, SipParseResult, SipRequest } from './message-types.ts';

/** What the call is attributed to: a number (or SIP user), and whether a trusted trunk vouched for it. */
export interface CallerIdentity {
  readonly caller: string;
  /** True only for the P-Asserted-Identity of a trunk the tenant trusts. */
  readonly verified: boolean;
}

export interface AssertedIdentity {
  /** The tel number, else the user part of the sip/sips URI (without its `;` parameters). */
  readonly caller: string;
  readonly uri: string;
  readonly displayName?: string;
}

export interface CallerIdentityDecision {
  readonly identity: CallerIdentity;
  /** Why a P-Asserted-Identity the request carried was not used (for a debug log line). */
  readonly ignored?: string;
}

/**
 * Far above a real identity (`"Name" <sip:+15551234567@trunk.example;user=phone>`, two of them):
 * anything longer is not an identity a trunk asserts, and is not worth parsing.
 */
const MAX_ASSERTED_IDENTITY_CHARS = 1_024;
/** The longest caller callgate takes: E.164 is 15 digits, SIP users are short names. */
const MAX_CALLER_CHARS = 128;
/** Control characters (also those an unescaped `%0D%0A` leaves) have no place in a caller. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/**
 * Reads the P-Asserted-Identity values of a request (one entry per header line, each maybe a comma
 * list): at most one sip/sips and at most one tel URI (RFC 3325 section 9.1). `undefined` when the
 * request carries none.
 */
export function parseAssertedIdentity(
  values: readonly string[],
): SipParseResult<AssertedIdentity | undefined> {
  if (values.length === 0) return ok(undefined);
  const length = values.reduce((sum, value) => sum + value.length, 0);
  if (length > MAX_ASSERTED_IDENTITY_CHARS)
    return fail(`${length} characters, above the limit of ${MAX_ASSERTED_IDENTITY_CHARS}`);
  const entries: NameAddr[] = [];
  for (const value of values) {
    const parts = splitList(value);
    if (parts === undefined) return fail('unbalanced quotes or angle brackets');
    for (const part of parts) {
      if (part.length === 0) continue;
      const parsed = parseNameAddr(part);
      if (!parsed.ok) return fail(parsed.reason);
      entries.push(parsed.value);
    }
  }
  if (entries.length === 0) return fail('no value');
  if (entries.length > 2) return fail(`${entries.length} values; at most a sip and a tel URI`);
  const tel = entries.filter((entry) => entry.uri.scheme === 'tel');
  const sip = entries.filter((entry) => entry.uri.scheme !== 'tel');
  if (tel.length > 1 || sip.length > 1) return fail('two URIs of the same kind');
  const chosen = tel[0] ?? sip[0];
  if (chosen === undefined) return fail('no value');
  const caller = userOf(chosen);
  if (caller === undefined) return fail('the sip URI has no user part');
  const problem = callerProblem(caller);
  if (problem !== undefined) return fail(problem);
  return ok({
    caller,
    uri: formatUri(chosen.uri),
    ...(chosen.displayName !== undefined ? { displayName: chosen.displayName } : {}),
  });
}

/** The caller of an inbound INVITE, from a trusted trunk's asserted identity or else From. */
export function callerIdentity(
  request: Pick<SipRequest, 'from' | 'headers'>,
  trunk: Pick<TrunkConfig, 'trustAssertedIdentity'>,
): CallerIdentityDecision {
  const from = request.from.uri;
  const fromCaller: CallerIdentity = {
    caller: (from.scheme === 'tel' ? from.number : from.user) ?? formatUri(from),
    verified: false,
  };
  const values = headerValues(request.headers, 'P-Asserted-Identity');
  if (values.length === 0) return { identity: fromCaller };
  if (!trunk.trustAssertedIdentity)
    return { identity: fromCaller, ignored: 'the trunk is not trusted to assert identities' };
  const asserted = parseAssertedIdentity(values);
  if (!asserted.ok) return { identity: fromCaller, ignored: `malformed: ${asserted.reason}` };
  if (asserted.value === undefined) return { identity: fromCaller };
  return { identity: { caller: asserted.value.caller, verified: true } };
}

/** {@link callerIdentity} for an INVITE of `tenant`, with a debug line when an asserted identity is ignored. */
export function identifyCaller(
  request: Pick<SipRequest, 'from' | 'headers' | 'callId'>,
  tenant: Pick<TenantConfig, 'id' | 'trunk'>,
  log: Pick<Logger, 'debug'>,
): CallerIdentity {
  const decision = callerIdentity(request, tenant.trunk);
  if (decision.ignored !== undefined)
    log.debug('P-Asserted-Identity ignored', {
      reason: decision.ignored,
      callId: request.callId,
      tenant: tenant.id,
    });
  return decision.identity;
}

/** A tel URI's number, or a sip/sips URI's user without the parameters a `user=phone` user may carry. */
function userOf(address: NameAddr): string | undefined {
  const { uri } = address;
  if (uri.scheme === 'tel') return uri.number;
  const user = uri.user?.split(';')[0];
  return user === undefined || user.length === 0 ? undefined : user;
}

function callerProblem(caller: string): string | undefined {
  if (caller.length > MAX_CALLER_CHARS)
    return `the caller is longer than ${MAX_CALLER_CHARS} characters`;
  if (CONTROL_CHARS.test(caller)) return 'the caller contains control characters';
  return undefined;
}
