import { describe, expect, it } from 'vitest';
import {
  base64Length,
  decodeBase64,
  encodeBase64Into,
} from '../../../gateway/realtime/base64-bytes.ts';

function bytesOf(length: number, seed: number): Buffer {
  return Buffer.from(
    Array.from({ length }, (_, i) => (i * 151 + seed * 31 + ((i * i) >> 3)) & 0xff),
  );
}

describe('when audio is encoded into a buffer', () => {
  it.each([0, 1, 2, 3, 4, 5, 159, 160, 161, 320, 4000])(
    'should write what toString("base64") gives for %i bytes, and only there',
    (length) => {
      const source = bytesOf(length, length);
      const target = Buffer.alloc(base64Length(length) + 4, 0x2a);
      encodeBase64Into(source, target, 2);
      expect(target.subarray(2, 2 + base64Length(length)).toString('latin1')).toBe(
        source.toString('base64'),
      );
      expect([...target.subarray(0, 2), ...target.subarray(2 + base64Length(length))]).toEqual([
        0x2a, 0x2a, 0x2a, 0x2a,
      ]);
    },
  );
});

describe('when base64 is decoded from a buffer', () => {
  it.each([0, 1, 2, 3, 800, 801, 802])(
    'should give what Buffer.from gives for %i bytes of canonical base64',
    (length) => {
      const source = bytesOf(length, 7);
      const text = Buffer.from(`xx${source.toString('base64')}yy`, 'latin1');
      expect(decodeBase64(text, 2, text.length - 2)).toEqual(source);
    },
  );

  it('should decode every byte value', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const text = Buffer.from(all.toString('base64'), 'latin1');
    expect(decodeBase64(text, 0, text.length)).toEqual(all);
  });

  it.each([
    ['no padding', 'QQ'],
    ['padding inside', 'QQ==QUFB'],
    ['three padding characters', 'Q==='],
    ['only padding', '===='],
    ['base64url characters', '-_-_'],
    ['a line break', 'QUFB\nQUFB'],
    ['a space', 'QUF BQUFB'],
    ['a quote', 'QUF"'],
    ['a backslash', 'QUF\\'],
    ['a non-ASCII byte', 'QUF\u00e9'],
  ])('should refuse %s (left to the lenient decoder)', (_name, text) => {
    const bytes = Buffer.from(text, 'latin1');
    expect(decodeBase64(bytes, 0, bytes.length)).toBeUndefined();
  });
});
