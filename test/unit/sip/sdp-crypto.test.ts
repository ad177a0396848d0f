/**
 * The SDES a=crypto attribute (RFC 4568 section 9.1): what callgate accepts from a peer, what it
 * refuses and why, and what it writes. Pure.
 */
import { describe, expect, it } from 'vitest';
import {
  formatCryptoAttribute,
  parseCryptoAttribute,
  SRTP_KEY_SALT_BYTES,
} from '../../../gateway/sip/sdp-crypto.ts';

const key30 = Buffer.from(Array.from({ length: 30 }, (_, i) => i + 1));
const key28 = Buffer.from(Array.from({ length: 28 }, (_, i) => 100 + i));
const b64 = (bytes: Buffer): string => bytes.toString('base64');

describe('when a crypto line is parsed', () => {
  it.each([
    ['AES_CM_128_HMAC_SHA1_80', key30],
    ['AES_CM_128_HMAC_SHA1_32', key30],
    ['AEAD_AES_128_GCM', key28],
  ] as const)('should accept %s with its exact key and salt length', (suite, key) => {
    const parsed = parseCryptoAttribute(`1 ${suite} inline:${b64(key)}`);
    expect(parsed).toEqual({ ok: true, value: { tag: 1, suite, keySalt: key } });
    expect(SRTP_KEY_SALT_BYTES[suite]).toBe(key.length);
  });

  it.each([
    ['2^31', 2 ** 31],
    ['2^20', 2 ** 20],
    ['1048576', 1_048_576],
  ])('should read the lifetime %s', (lifetime, packets) => {
    const parsed = parseCryptoAttribute(
      `7 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|${lifetime}`,
    );
    expect(parsed.ok && parsed.value.lifetime).toBe(packets);
  });

  it.each([
    ['|2^20|1:4', 2 ** 20, [0, 0, 0, 1]],
    ['|1:1', undefined, [1]],
    ['|2^31|258:2', 2 ** 31, [1, 2]],
    ['|4294967295:4', undefined, [0xff, 0xff, 0xff, 0xff]],
  ] as const)('should read the MKI of %s as its bytes, big-endian', (extra, lifetime, mki) => {
    const parsed = parseCryptoAttribute(`2 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}${extra}`);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.value.lifetime).toBe(lifetime);
    expect([...(parsed.value.mki ?? [])]).toEqual(mki);
  });

  it('should accept a window size hint and KDR=0 as session parameters', () => {
    const line = `3 AES_CM_128_HMAC_SHA1_32 inline:${b64(key30)} WSH=64 KDR=0`;
    expect(parseCryptoAttribute(line).ok).toBe(true);
  });

  it.each<[string, string, RegExp]>([
    [
      'a tag that is not a number',
      `x AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}`,
      /bad crypto tag/,
    ],
    [
      'a ten-digit tag',
      `1234567890 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}`,
      /bad crypto tag/,
    ],
    [
      'an unknown suite',
      `1 F8_128_HMAC_SHA1_80 inline:${b64(key30)}`,
      /unknown crypto suite F8_128/,
    ],
    ['a 256-bit suite', `1 AES_256_CM_HMAC_SHA1_80 inline:${b64(key30)}`, /unknown crypto suite/],
    ['no key parameters', '1 AES_CM_128_HMAC_SHA1_80', /not inline/],
    ['another key method', `1 AES_CM_128_HMAC_SHA1_80 uri:${b64(key30)}`, /not inline/],
    ['bad base64', '1 AES_CM_128_HMAC_SHA1_80 inline:@@@@not*base64!!', /not base64/],
    [
      'base64 without its padding',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key28).replace(/=+$/, '')}`,
      /not base64/,
    ],
    ['a key too short', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key28)}`, /28 bytes/],
    ['a key too long', `1 AEAD_AES_128_GCM inline:${b64(key30)}`, /30 bytes for AEAD_AES_128_GCM/],
    ['an empty key', '1 AES_CM_128_HMAC_SHA1_80 inline:', /0 bytes/],
    ['an MKI longer than 128 bytes', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|1:129`, /MKI/],
    ['an MKI of no bytes', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|1:0`, /MKI/],
    [
      'an MKI whose value does not fit its length',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|256:1`,
      /MKI/,
    ],
    [
      'an MKI before the lifetime',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|1:4|2^20`,
      /malformed/,
    ],
    ['two MKIs', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|2^20|1:4|2:4`, /malformed/],
    [
      'two master keys',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)};inline:${b64(key30)}`,
      /more than one/,
    ],
    ['a lifetime of 0', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|0`, /lifetime/],
    ['a lifetime beyond 2^48', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|2^49`, /lifetime/],
    [
      'a lifetime that is text',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|forever`,
      /lifetime/,
    ],
    ['two lifetimes', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)}|2^20|2^20`, /malformed/],
    [
      'unencrypted SRTP',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)} UNENCRYPTED_SRTP`,
      /UNENCRYPTED_SRTP/,
    ],
    [
      'unauthenticated SRTP',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)} UNAUTHENTICATED_SRTP`,
      /UNAUTHENTICATED/,
    ],
    ['a key derivation rate', `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)} KDR=24`, /KDR/],
    [
      'an unknown session parameter',
      `1 AES_CM_128_HMAC_SHA1_80 inline:${b64(key30)} FEC_ORDER=FEC_SRTP`,
      /FEC_ORDER/,
    ],
  ])('should refuse %s', (_what, line, reason) => {
    const parsed = parseCryptoAttribute(line);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it('should never quote the key in a refusal', () => {
    const secret = b64(key30);
    for (const line of [
      `1 AES_CM_128_HMAC_SHA1_80 inline:${secret}|1:200`,
      `1 AEAD_AES_128_GCM inline:${secret}`,
      `1 AES_CM_128_HMAC_SHA1_80 inline:${secret} ${secret}`,
      `1 ${secret} inline:${secret}`,
    ]) {
      const parsed = parseCryptoAttribute(line);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.reason).not.toContain(secret.slice(0, 12));
    }
  });

  it('should refuse generated garbage without throwing', () => {
    let seed = 7;
    const next = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    const alphabet = ' \t|:;^=+/0123456789AZaz_inline:AES_CM_128_HMAC_SHA1_80';
    for (let i = 0; i < 2_000; i++) {
      let line = '';
      for (let n = next() % 80; n > 0; n--) line += alphabet[next() % alphabet.length];
      const parsed = parseCryptoAttribute(line);
      if (parsed.ok)
        expect(parsed.value.keySalt.length).toBe(SRTP_KEY_SALT_BYTES[parsed.value.suite]);
    }
  });
});

describe('when callgate writes its crypto line', () => {
  it('should write tag, suite and the inline key, and read back as written', () => {
    const text = formatCryptoAttribute({
      tag: 2,
      suite: 'AES_CM_128_HMAC_SHA1_32',
      keySalt: key30,
    });
    expect(text).toBe(`2 AES_CM_128_HMAC_SHA1_32 inline:${b64(key30)}`);
    expect(parseCryptoAttribute(text)).toEqual({
      ok: true,
      value: { tag: 2, suite: 'AES_CM_128_HMAC_SHA1_32', keySalt: key30 },
    });
  });
});
