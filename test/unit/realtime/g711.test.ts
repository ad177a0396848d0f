import { describe, expect, it } from 'vitest';
import {
  MULAW_SILENCE,
  decodeAlaw,
  decodeMulaw,
  decodePcm16,
  encodeMulaw,
} from '../../../gateway/realtime/simulator/g711.ts';

describe('when μ-law samples are encoded and decoded', () => {
  it.each([0, 100, -100, 1000, -1000, 8000, -8000, 32000, -32000])(
    'should come back within the codec step for %i',
    (sample) => {
      const decoded = decodeMulaw(Uint8Array.of(encodeMulaw(sample)))[0] ?? NaN;
      // μ-law keeps about 4 bits of mantissa: the error grows with the magnitude.
      expect(Math.abs(decoded - sample)).toBeLessThanOrEqual(Math.max(8, Math.abs(sample) / 16));
    },
  );

  it('should decode the silence byte to zero', () => {
    expect(decodeMulaw(Uint8Array.of(MULAW_SILENCE))[0]).toBe(0);
  });
});

describe('when 16-bit PCM bytes are decoded', () => {
  it('should read little-endian samples and ignore an odd trailing byte', () => {
    expect([...decodePcm16(Buffer.from([0x01, 0x00, 0xff, 0xff, 0x7f]))]).toEqual([1, -1]);
  });
});

describe('when A-law bytes are decoded', () => {
  it('should decode the silence byte to the smallest step and keep the sign', () => {
    const [silenceSample, positive, negative] = decodeAlaw(Uint8Array.of(0xd5, 0xaa, 0x2a));
    expect(Math.abs(silenceSample ?? NaN)).toBe(8);
    // 0xAA and 0x2A differ only in the sign bit: same magnitude, opposite signs.
    expect(positive).toBe(-(negative ?? NaN));
    expect(Math.abs(positive ?? 0)).toBeGreaterThan(8000);
  });
});
