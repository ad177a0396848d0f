/**
 * G.711 μ-law and A-law (ITU-T G.711), table driven. The tables are built once at load from the
 * classic reference algorithm (Sun Microsystems' g711.c, the code the ITU G.191 tools and most
 * telephony stacks descend from): a 256-entry decode table per law, and encode tables indexed by
 * the 14-bit (μ-law) or 13-bit (A-law) magnitude the law actually resolves.
 */

/** Bias added before μ-law segment search (33 in 14-bit units, 0x84 in 16-bit). */
const ULAW_BIAS = 0x84;
/** Largest 14-bit magnitude μ-law codes; above it the top code is used. */
const ULAW_CLIP = 8159;
const ULAW_SEGMENT_ENDS = [0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff, 0x1fff];
const ALAW_SEGMENT_ENDS = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];

/** The μ-law code for digital silence (+0). */
export const ULAW_SILENCE = 0xff;
/** The A-law code for digital silence (+8, the smallest positive step; A-law has no zero). */
export const ALAW_SILENCE = 0xd5;

function segmentOf(value: number, ends: readonly number[]): number {
  for (let i = 0; i < ends.length; i++) if (value <= (ends[i] as number)) return i;
  return ends.length;
}

function linearToUlawReference(sample: number): number {
  let value = sample >> 2;
  let mask: number;
  if (value < 0) {
    value = -value;
    mask = 0x7f;
  } else {
    mask = 0xff;
  }
  if (value > ULAW_CLIP) value = ULAW_CLIP;
  value += ULAW_BIAS >> 2;
  const segment = segmentOf(value, ULAW_SEGMENT_ENDS);
  if (segment >= 8) return 0x7f ^ mask;
  return ((segment << 4) | ((value >> (segment + 1)) & 0x0f)) ^ mask;
}

function ulawToLinearReference(code: number): number {
  const inverted = ~code & 0xff;
  let magnitude = ((inverted & 0x0f) << 3) + ULAW_BIAS;
  magnitude <<= (inverted & 0x70) >> 4;
  return inverted & 0x80 ? ULAW_BIAS - magnitude : magnitude - ULAW_BIAS;
}

function linearToAlawReference(sample: number): number {
  let value = sample >> 3;
  let mask: number;
  if (value >= 0) {
    mask = 0xd5;
  } else {
    mask = 0x55;
    value = -value - 1;
  }
  const segment = segmentOf(value, ALAW_SEGMENT_ENDS);
  if (segment >= 8) return 0x7f ^ mask;
  const quantized = segment < 2 ? (value >> 1) & 0x0f : (value >> segment) & 0x0f;
  return ((segment << 4) | quantized) ^ mask;
}

function alawToLinearReference(code: number): number {
  const value = code ^ 0x55;
  let magnitude = (value & 0x0f) << 4;
  const segment = (value & 0x70) >> 4;
  if (segment === 0) magnitude += 8;
  else if (segment === 1) magnitude += 0x108;
  else magnitude = (magnitude + 0x108) << (segment - 1);
  return value & 0x80 ? magnitude : -magnitude;
}

const ULAW_DECODE = new Int16Array(256);
const ALAW_DECODE = new Int16Array(256);
for (let code = 0; code < 256; code++) {
  ULAW_DECODE[code] = ulawToLinearReference(code);
  ALAW_DECODE[code] = alawToLinearReference(code);
}
/** Indexed by (sample >> 2) + 8192: μ-law resolves 14 bits. */
const ULAW_ENCODE = new Uint8Array(16384);
for (let i = 0; i < 16384; i++) ULAW_ENCODE[i] = linearToUlawReference((i - 8192) << 2);
/** Indexed by (sample >> 3) + 4096: A-law resolves 13 bits. */
const ALAW_ENCODE = new Uint8Array(8192);
for (let i = 0; i < 8192; i++) ALAW_ENCODE[i] = linearToAlawReference((i - 4096) << 3);

export function ulawToLinear(code: number): number {
  return ULAW_DECODE[code & 0xff] as number;
}

export function linearToUlaw(sample: number): number {
  return ULAW_ENCODE[(clamp16(sample) >> 2) + 8192] as number;
}

export function alawToLinear(code: number): number {
  return ALAW_DECODE[code & 0xff] as number;
}

export function linearToAlaw(sample: number): number {
  return ALAW_ENCODE[(clamp16(sample) >> 3) + 4096] as number;
}

export function decodeUlaw(
  codes: Uint8Array,
  out: Int16Array = new Int16Array(codes.length),
): Int16Array {
  for (let i = 0; i < codes.length; i++) out[i] = ULAW_DECODE[codes[i] as number] as number;
  return out;
}

export function encodeUlaw(
  samples: Int16Array,
  out: Buffer = Buffer.allocUnsafe(samples.length),
): Buffer {
  for (let i = 0; i < samples.length; i++)
    out[i] = ULAW_ENCODE[((samples[i] as number) >> 2) + 8192] as number;
  return out;
}

export function decodeAlaw(
  codes: Uint8Array,
  out: Int16Array = new Int16Array(codes.length),
): Int16Array {
  for (let i = 0; i < codes.length; i++) out[i] = ALAW_DECODE[codes[i] as number] as number;
  return out;
}

export function encodeAlaw(
  samples: Int16Array,
  out: Buffer = Buffer.allocUnsafe(samples.length),
): Buffer {
  for (let i = 0; i < samples.length; i++)
    out[i] = ALAW_ENCODE[((samples[i] as number) >> 3) + 4096] as number;
  return out;
}

function clamp16(sample: number): number {
  const rounded = Math.round(sample);
  return rounded > 32767 ? 32767 : rounded < -32768 ? -32768 : rounded;
}
