import { describe, expect, it } from 'vitest';
import {
  ALAW_SILENCE,
  ULAW_SILENCE,
  alawToLinear,
  decodeAlaw,
  decodeUlaw,
  encodeAlaw,
  encodeUlaw,
  linearToAlaw,
  linearToUlaw,
  ulawToLinear,
} from '../../../gateway/media/g711.ts';

/**
 * Reconstruction levels straight from the segment structure of ITU-T G.711 Tables 1 and 2:
 * μ-law decision values (14-bit) open segments at 31, 95, 223, ..., 4063 with steps 4, 8, ...,
 * 256 (segment 0: step 2 from 0); A-law (13-bit) has two step-2 segments below 64, then segments
 * starting at 64, 128, ..., 2048 with steps 4, 8, ..., 128. A level is the middle of its interval.
 */
const ULAW_SEGMENT_START = [0, 31, 95, 223, 479, 991, 2015, 4063];
function ituUlawLevel(segment: number, step: number): number {
  if (segment === 0) return 2 * step;
  const width = 2 ** (segment + 1);
  return (ULAW_SEGMENT_START[segment] as number) + width / 2 + step * width;
}
function ituAlawLevel(segment: number, step: number): number {
  if (segment < 2) return 32 * segment + 2 * step + 1;
  const width = 2 ** segment;
  return 2 ** (segment + 4) + width / 2 + step * width;
}

describe('when decoding G.711', () => {
  it('should map all 256 μ-law codes to the ITU reconstruction levels', () => {
    for (let segment = 0; segment < 8; segment++) {
      for (let step = 0; step < 16; step++) {
        const level = 4 * ituUlawLevel(segment, step);
        const index = 16 * segment + step;
        expect(ulawToLinear(0xff - index)).toBe(level);
        expect(ulawToLinear(0x7f - index)).toBe(-level || 0);
      }
    }
  });

  it('should map all 256 A-law codes to the ITU reconstruction levels (even bits inverted)', () => {
    for (let segment = 0; segment < 8; segment++) {
      for (let step = 0; step < 16; step++) {
        const level = 8 * ituAlawLevel(segment, step);
        const index = (segment << 4) | step;
        expect(alawToLinear((0x80 | index) ^ 0x55)).toBe(level);
        expect(alawToLinear(index ^ 0x55)).toBe(-level);
      }
    }
  });

  it('should match the well-known anchor values', () => {
    expect([
      ulawToLinear(0xff),
      ulawToLinear(0x7f),
      ulawToLinear(0x80),
      ulawToLinear(0x00),
    ]).toEqual([0, 0, 32124, -32124]);
    expect([
      alawToLinear(0xd5),
      alawToLinear(0x55),
      alawToLinear(0xaa),
      alawToLinear(0x2a),
    ]).toEqual([8, -8, 32256, -32256]);
    expect([linearToUlaw(0), linearToUlaw(32767), linearToUlaw(-32768)]).toEqual([
      ULAW_SILENCE,
      0x80,
      0x00,
    ]);
    expect([linearToAlaw(0), linearToAlaw(-1), linearToAlaw(32767), linearToAlaw(-32768)]).toEqual([
      ALAW_SILENCE,
      0x55,
      0xaa,
      0x2a,
    ]);
  });
});

describe('when encoding G.711', () => {
  it('should round-trip every μ-law code except negative zero', () => {
    for (let code = 0; code < 256; code++) {
      expect(linearToUlaw(ulawToLinear(code))).toBe(code === 0x7f ? 0xff : code);
    }
  });

  it('should round-trip every A-law code', () => {
    for (let code = 0; code < 256; code++) expect(linearToAlaw(alawToLinear(code))).toBe(code);
  });

  it('should quantize every 16-bit sample within the coded range to a neighbouring level', () => {
    const levels = (decode: (c: number) => number) =>
      [...new Set(Array.from({ length: 256 }, (_, c) => decode(c)))].sort((a, b) => a - b);
    for (const [encode, decode, truncation] of [
      [linearToUlaw, ulawToLinear, 4],
      [linearToAlaw, alawToLinear, 8],
    ] as const) {
      const sorted = levels(decode);
      for (let x = -32000; x <= 32000; x++) {
        const y = decode(encode(x));
        const at = sorted.indexOf(y);
        const gap = Math.max(y - (sorted[at - 1] ?? y), (sorted[at + 1] ?? y) - y);
        // Half a quantization step, plus the 2 (μ) or 3 (A) low bits the law truncates first.
        expect(Math.abs(y - x)).toBeLessThanOrEqual(gap / 2 + truncation);
      }
    }
  });

  it('should encode and decode whole buffers through the tables', () => {
    const samples = Int16Array.from([0, 1000, -1000, 32767, -32768, 8]);
    const ulaw = encodeUlaw(samples);
    expect([...ulaw]).toEqual([...samples].map((s) => linearToUlaw(s)));
    expect([...decodeUlaw(ulaw)]).toEqual([...ulaw].map((c) => ulawToLinear(c)));
    const alaw = encodeAlaw(samples);
    expect([...alaw]).toEqual([...samples].map((s) => linearToAlaw(s)));
    expect([...decodeAlaw(alaw)]).toEqual([...alaw].map((c) => alawToLinear(c)));
  });
});
