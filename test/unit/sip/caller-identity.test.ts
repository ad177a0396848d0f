/**
 * Who a call is attributed to: a trusted trunk's P-Asserted-Identity (RFC 3325), else From. The
 * asserted identity is parsed from hostile text; anything doubtful is ignored, never thrown.
 */
import { describe, expect, it } from 'vitest';
import { tenantSchema } from '../../../config/schema.ts';
import { callerIdentity, parseAssertedIdentity } from '../../../gateway/sip/caller-identity.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import type { SipRequest } from '../../../gateway/sip/message-types.ts';

function invite(from: string, extra: readonly string[] = []): SipRequest {
  const text = [
    'INVITE sip:+15550100@gw SIP/2.0',
    'Via: SIP/2.0/UDP h;branch=z9hG4bK1',
    `From: ${from};tag=1`,
    'To: <sip:+15550100@gw>',
    'Call-ID: c',
    'CSeq: 1 INVITE',
    ...extra,
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
  const parsed = parseSipMessage(text);
  if (!parsed.ok || parsed.value.kind !== 'request') throw new Error(`fixture: ${text}`);
  return parsed.value;
}

const TRUSTED = { trustAssertedIdentity: true };
const UNTRUSTED = { trustAssertedIdentity: false };

describe('when a P-Asserted-Identity value is parsed', () => {
  it.each([
    ['a sip URI in angle brackets', ['<sip:+15550123@trunk.example>'], '+15550123'],
    ['a display name', ['"Alice Smith" <sip:alice@trunk.example>'], 'alice'],
    ['an addr-spec', ['sip:+15550123@trunk.example'], '+15550123'],
    ['a sips URI', ['<sips:bob@trunk.example:5061;transport=tls>'], 'bob'],
    ['a tel URI', ['<tel:+15550123>'], '+15550123'],
    ['a tel URI with parameters', ['<tel:+1-555-0123;cpc=ordinary;noa=national>'], '+1-555-0123'],
    ['a tel URI as an addr-spec', ['tel:+15550123;verstat=TN-Validation-Passed'], '+15550123'],
    [
      'a user=phone user with parameters',
      ['<sip:+15550123;cpc=ordinary@trunk;user=phone>'],
      '+15550123',
    ],
    ['an escaped user', ['<sip:%2B15550123@trunk.example>'], '+15550123'],
    ['a sip and a tel URI on one line', ['<sip:alice@trunk>, <tel:+15550123>'], '+15550123'],
    ['a tel and a sip URI on two lines', ['<tel:+15550123>', '<sip:alice@trunk>'], '+15550123'],
    ['a quoted comma in a display name', ['"Smith, Alice" <sip:alice@trunk>'], 'alice'],
    ['an empty list element', ['<sip:alice@trunk>, '], 'alice'],
  ])('should take the caller from %s', (_what, values, caller) => {
    const parsed = parseAssertedIdentity(values);
    expect(parsed.ok && parsed.value?.caller).toBe(caller);
  });

  it('should keep the display name and the URI', () => {
    expect(parseAssertedIdentity(['"Alice" <sip:alice@trunk.example>'])).toEqual({
      ok: true,
      value: { caller: 'alice', uri: 'sip:alice@trunk.example', displayName: 'Alice' },
    });
  });

  it('should say none when the request carries none', () => {
    expect(parseAssertedIdentity([])).toEqual({ ok: true, value: undefined });
  });

  it.each([
    ['an unterminated quote', ['"Alice <sip:alice@trunk>']],
    ['an unterminated angle bracket', ['<sip:alice@trunk']],
    ['an unterminated quote before a second value', ['"a, <sip:a@t>', '<tel:+1555>']],
    ['two sip URIs', ['<sip:alice@trunk>, <sip:bob@trunk>']],
    ['two tel URIs', ['<tel:+15550123>', '<tel:+15550124>']],
    ['three values', ['<sip:a@t>, <tel:+1555>, <sips:b@t>']],
    ['a sip URI without a user', ['<sip:trunk.example>']],
    ['an unsupported scheme', ['<mailto:alice@example.com>']],
    ['an http URI', ['<https://evil.example/>']],
    ['a tel URI with letters', ['<tel:call-me-maybe>']],
    ['a user that unescapes to CR LF', ['<sip:a%0D%0AX-Evil:%20yes@trunk>']],
    ['a user that unescapes to NUL', ['<sip:a%00b@trunk>']],
    ['a broken escape', ['<sip:a%zz@trunk>']],
    ['white space inside the brackets', ['< sip:alice@trunk >']],
    ['only commas', [',,,']],
    ['an empty value', ['']],
    ['a huge value', [`<sip:${'1'.repeat(70_000)}@trunk>`]],
    ['a huge display name', [`"${'a'.repeat(5_000)}" <sip:alice@trunk>`]],
    ['a user above 128 characters', [`<sip:${'1'.repeat(129)}@trunk>`]],
    ['many values', [Array.from({ length: 500 }, (_, i) => `<sip:u${i}@t>`).join(',')]],
  ])('should refuse %s', (_what, values) => {
    expect(parseAssertedIdentity(values).ok).toBe(false);
  });

  it('should return a result for every generated mutation, never throw', () => {
    const seeds = ['"Alice" <sip:+15550123;cpc=x@trunk.example;user=phone>, <tel:+1-555;a=b>'];
    const alphabet = ' \t,;:<>"\\%@=+0123456789abcdefsiptel.-#*';
    let state = 7;
    const random = (): number => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state / 2 ** 32;
    };
    for (let i = 0; i < 20_000; i++) {
      const chars = [...(seeds[0] ?? '')];
      for (let n = 1 + Math.floor(random() * 6); n > 0; n--) {
        const at = Math.floor(random() * chars.length);
        const c = alphabet.charAt(Math.floor(random() * alphabet.length));
        if (random() < 0.3) chars.splice(at, 1);
        else if (random() < 0.5) chars.splice(at, 0, c);
        else chars[at] = c;
      }
      const parsed = parseAssertedIdentity([chars.join('')]);
      if (parsed.ok && parsed.value !== undefined) {
        expect(parsed.value.caller.length).toBeGreaterThan(0);
        expect(parsed.value.caller).not.toMatch(/[\r\n]/);
      }
    }
  });
});

describe('when the caller of an INVITE is decided', () => {
  it('should take a trusted trunk’s asserted identity, verified', () => {
    const request = invite('<sip:+15559999@trunk>', [
      'P-Asserted-Identity: "Alice" <sip:+15550123@trunk;user=phone>',
    ]);
    expect(callerIdentity(request, TRUSTED)).toEqual({
      identity: { caller: '+15550123', verified: true },
    });
  });

  it('should ignore an untrusted trunk’s asserted identity and take From, unverified', () => {
    const request = invite('<sip:+15559999@trunk>', ['P-Asserted-Identity: <sip:+15550123@trunk>']);
    expect(callerIdentity(request, UNTRUSTED)).toEqual({
      identity: { caller: '+15559999', verified: false },
      ignored: 'the trunk is not trusted to assert identities',
    });
  });

  it('should take From, unverified, when a trusted trunk asserts nothing', () => {
    expect(callerIdentity(invite('"Bob" <sip:bob@trunk>'), TRUSTED)).toEqual({
      identity: { caller: 'bob', verified: false },
    });
  });

  it('should take From’s tel number, and From’s URI when it has no user', () => {
    expect(callerIdentity(invite('<tel:+15550177>'), UNTRUSTED).identity.caller).toBe('+15550177');
    expect(callerIdentity(invite('<sip:trunk.example>'), UNTRUSTED).identity.caller).toBe(
      'sip:trunk.example',
    );
  });

  it('should ignore a malformed asserted identity of a trusted trunk and say why', () => {
    const request = invite('<sip:+15559999@trunk>', ['P-Asserted-Identity: <sip:a@t>, <sip:b@t>']);
    const decision = callerIdentity(request, TRUSTED);
    expect(decision.identity).toEqual({ caller: '+15559999', verified: false });
    expect(decision.ignored).toMatch(/^malformed: /);
  });

  it('should accept an INVITE whose asserted identity has an unterminated quote', () => {
    // The message parser leaves P-Asserted-Identity whole: a broken one is not a 400.
    const request = invite('<sip:+15559999@trunk>', ['P-Asserted-Identity: "Alice <sip:a@t>']);
    expect(callerIdentity(request, TRUSTED)).toMatchObject({
      identity: { caller: '+15559999', verified: false },
      ignored: expect.stringMatching(/unbalanced/) as unknown,
    });
  });

  it('should read the asserted identity by its header name in any case', () => {
    const request = invite('<sip:x@trunk>', ['p-asserted-identity: <tel:+15550123>']);
    expect(callerIdentity(request, TRUSTED).identity).toEqual({
      caller: '+15550123',
      verified: true,
    });
  });
});

describe('when a tenant trusts its trunk’s asserted identities', () => {
  const tenant = (trunk: Record<string, unknown>) =>
    tenantSchema.safeParse({ id: 'acme', numbers: ['100'], agent: 'front-desk', trunk });

  it('should not trust them by default', () => {
    const parsed = tenant({ allowFrom: ['192.0.2.0/24'] });
    expect(parsed.success && parsed.data.trunk.trustAssertedIdentity).toBe(false);
  });

  it('should require an address allowlist or digest authentication', () => {
    const open = tenant({ trustAssertedIdentity: true });
    expect(open.success).toBe(false);
    expect(open.error?.issues[0]?.path).toEqual(['trunk', 'trustAssertedIdentity']);
    expect(tenant({ trustAssertedIdentity: true, allowFrom: ['192.0.2.0/24'] }).success).toBe(true);
    expect(
      tenant({
        trustAssertedIdentity: true,
        digest: { realm: 'r', username: 'u', passwordEnv: 'PW' },
      }).success,
    ).toBe(true);
  });
});
