import { describe, expect, it } from 'vitest';
import { tenantSchema } from '../../../config/schema.ts';
import { CallRouter } from '../../../gateway/sip/call-router.ts';
import { DigestNonceStore } from '../../../gateway/sip/digest-nonce-store.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import type { SipRequest } from '../../../gateway/sip/message-types.ts';
import { SourceRateLimiter } from '../../../gateway/sip/source-rate-limiter.ts';
import { TrunkGuard, digestResponse, parseDigest } from '../../../gateway/sip/trunk-guard.ts';

const tenant = tenantSchema.parse({
  id: 'acme',
  numbers: ['+15550100', '200'],
  agent: 'front-desk',
  trunk: {
    allowFrom: ['192.0.2.0/24', '2001:db8::/32'],
    digest: { realm: 'r', username: 'u', passwordEnv: 'PW' },
  },
});

function invite(authorization?: string, uri = 'sip:+15550100@gw'): SipRequest {
  const text = `INVITE ${uri} SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:200@gw>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n${authorization !== undefined ? `Authorization: ${authorization}\r\n` : ''}Content-Length: 0\r\n\r\n`;
  const parsed = parseSipMessage(text);
  if (!parsed.ok || parsed.value.kind !== 'request') throw new Error('fixture');
  return parsed.value;
}

function answer(challenge: string, password: string, nc = '00000001'): string {
  const nonce = /nonce="([^"]+)"/.exec(challenge)?.[1] ?? '';
  const fields = {
    username: 'u',
    realm: 'r',
    nonce,
    uri: 'sip:+15550100@gw',
    qop: 'auth',
    nc,
    cnonce: 'abc',
  };
  const response = digestResponse(fields, 'INVITE', password);
  return `Digest username="u", realm="r", nonce="${nonce}", uri="sip:+15550100@gw", response="${response}", algorithm=MD5, qop=auth, nc=${nc}, cnonce="abc"`;
}

describe('when a tenant has an allowlist and digest credentials', () => {
  let now = 1_000_000;
  const guard = new TrunkGuard([tenant], {
    nonces: new DigestNonceStore({ lifetimeMs: 30_000, now: () => now }),
    readSecret: (name) => (name === 'PW' ? 'pw-123456' : undefined),
  });

  it('should refuse a source outside the allowlist before any challenge', () => {
    expect(guard.check(invite(), '198.51.100.1', tenant)).toEqual({
      type: 'forbidden',
      reason: 'source-not-allowed',
    });
  });

  it('should challenge an allowed source without credentials, and accept the right answer once', () => {
    const challenge = guard.check(invite(), '192.0.2.7', tenant);
    expect(challenge.type).toBe('challenge');
    if (challenge.type !== 'challenge') return;
    const authorization = answer(challenge.header, 'pw-123456');
    expect(guard.check(invite(authorization), '192.0.2.7', tenant)).toEqual({ type: 'allow' });
    // The same Authorization again is a replay: the nonce is used up.
    expect(guard.check(invite(authorization), '192.0.2.7', tenant).type).toBe('challenge');
  });

  it('should refuse a wrong password with 403 material and keep the nonce for a retry', () => {
    const challenge = guard.check(invite(), '2001:db8::5', tenant);
    if (challenge.type !== 'challenge') throw new Error('expected a challenge');
    expect(guard.check(invite(answer(challenge.header, 'wrong')), '2001:db8::5', tenant)).toEqual({
      type: 'forbidden',
      reason: 'bad-credentials',
    });
    expect(
      guard.check(invite(answer(challenge.header, 'pw-123456')), '2001:db8::5', tenant),
    ).toEqual({ type: 'allow' });
  });

  it('should challenge again with stale=true when the nonce expired', () => {
    const challenge = guard.check(invite(), '192.0.2.7', tenant);
    if (challenge.type !== 'challenge') throw new Error('expected a challenge');
    now += 31_000;
    const again = guard.check(invite(answer(challenge.header, 'pw-123456')), '192.0.2.7', tenant);
    expect(again.type === 'challenge' && again.header).toContain('stale=true');
  });

  it('should parse a digest header with quoted and bare values', () => {
    expect(
      parseDigest(
        'Digest username="u", realm="r", nonce="n", uri="sip:x", response="abc", qop=auth, nc=00000001, cnonce="c"',
      ),
    ).toMatchObject({ username: 'u', qop: 'auth', nc: '00000001' });
    expect(parseDigest('Basic dXNlcjpwYXNz')).toBeUndefined();
    expect(parseDigest('Digest username="u"')).toBeUndefined();
  });
});

describe('when a source exceeds its rate', () => {
  it('should allow the burst, refuse the next, and allow again after refill', () => {
    let now = 0;
    const limiter = new SourceRateLimiter({ ratePerSecond: 2, burst: 2, now: () => now });
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([true, true, false]);
    expect(limiter.take('b')).toBe(true);
    expect(limiter.retryAfterSeconds('a')).toBe(1);
    now += 500;
    expect(limiter.take('a')).toBe(true);
  });

  it('should keep at most maxSources buckets under a spoofed flood', () => {
    const limiter = new SourceRateLimiter({
      ratePerSecond: 1,
      burst: 1,
      maxSources: 100,
      now: () => 0,
    });
    for (let i = 0; i < 10_000; i++) limiter.take(`10.0.${i >> 8}.${i & 255}`);
    expect(limiter.take('10.0.0.0')).toBe(true);
  });
});

describe('when routing a called number', () => {
  const router = new CallRouter([tenant]);
  it.each([
    ['+15550100', 'acme'],
    ['15550100', 'acme'],
    ['+1-555-0100', 'acme'],
    ['200', 'acme'],
    ['201', undefined],
  ])('should route %s to %s', (number, expected) => {
    expect(router.route(number)?.tenant.id).toBe(expected);
  });

  it('should take the Request-URI user first, then the To user', () => {
    expect(CallRouter.calledNumber(invite())).toBe('+15550100');
    expect(CallRouter.calledNumber(invite(undefined, 'sip:gw'))).toBe('200');
    expect(CallRouter.calledNumber(invite(undefined, 'tel:+1-555-0100'))).toBe('+1-555-0100');
  });
});

describe('when challenges are never answered', () => {
  it('should forget expired nonces as new ones are issued, not keep them until maxOutstanding', () => {
    let now = 0;
    const nonces = new DigestNonceStore({ lifetimeMs: 30_000, now: () => now });
    for (let i = 0; i < 1000; i++) {
      nonces.issue();
      now += 100;
    }
    // One every 100 ms for 100 s: only the last 30 s worth are still outstanding.
    expect(nonces.size).toBe(300);
  });

  it('should never hold more than maxOutstanding', () => {
    const nonces = new DigestNonceStore({ lifetimeMs: 30_000, maxOutstanding: 50, now: () => 0 });
    for (let i = 0; i < 500; i++) nonces.issue();
    expect(nonces.size).toBe(50);
  });
});
