/**
 * Where a far end's MKI sits in its packets (RFC 3711 section 3.1, RFC 7714 section 8.1) and how
 * callgate cuts it out before libsrtp checks the packet. Pure byte layout, per suite and kind.
 */
import { describe, expect, it } from 'vitest';
import { insertMki, stripMki } from '../../../gateway/media/srtp-mki.ts';
import type { SrtpSuiteName } from '../../../gateway/media/srtp-transform.ts';

const header = Buffer.alloc(12, 0x80);
const body = Buffer.from('encrypted-payload');
const tag = (bytes: number): Buffer => Buffer.alloc(bytes, 0x7a);
const mki = Buffer.from([0, 0, 0, 1]);

describe.each<[SrtpSuiteName, 'rtp' | 'rtcp', number]>([
  ['AES_CM_128_HMAC_SHA1_80', 'rtp', 10],
  ['AES_CM_128_HMAC_SHA1_32', 'rtp', 4],
  ['AES_CM_128_HMAC_SHA1_32', 'rtcp', 10],
  ['AEAD_AES_128_GCM', 'rtp', 0],
  ['AEAD_AES_128_GCM', 'rtcp', 0],
])('with %s over %s', (suite, kind, tagBytes) => {
  const plain = Buffer.concat([header, body, tag(tagBytes)]);

  it('should put the MKI before the tag that follows it, and cut it out again', () => {
    const withMki = insertMki(plain, mki, suite, kind);
    expect(withMki).toEqual(Buffer.concat([header, body, mki, tag(tagBytes)]));
    expect(stripMki(Buffer.from(withMki), mki, suite, kind)).toEqual(plain);
  });

  it('should refuse a packet that carries another MKI, and leave it as it came', () => {
    const other = insertMki(plain, Buffer.from([0, 0, 0, 2]), suite, kind);
    const copy = Buffer.from(other);
    expect(stripMki(copy, mki, suite, kind)).toBeUndefined();
    expect(copy).toEqual(other);
  });
});

describe('when a packet is too short to hold a header, an MKI and a tag', () => {
  it('should refuse it instead of reading outside it', () => {
    expect(stripMki(Buffer.alloc(20), mki, 'AES_CM_128_HMAC_SHA1_80', 'rtp')).toBeUndefined();
    expect(stripMki(Buffer.alloc(3), mki, 'AEAD_AES_128_GCM', 'rtcp')).toBeUndefined();
  });
});
