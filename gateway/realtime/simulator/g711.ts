/**
 * G.711 μ-law and A-law to 16-bit linear, for the simulator's VAD (it listens to what the gateway
 * sends). Table-driven: decoding runs on every 20 ms frame of every simulated call.
 */

const MULAW_TABLE = new Int16Array(256);
const ALAW_TABLE = new Int16Array(256);

for (let i = 0; i < 256; i++) {
  const u = ~i & 0xff;
  const exponent = (u >> 4) & 0x07;
  const mantissa = u & 0x0f;
  const magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84;
  MULAW_TABLE[i] = u & 0x80 ? -magnitude : magnitude;

  const a = i ^ 0x55;
  const aExponent = (a >> 4) & 0x07;
  const aMantissa = a & 0x0f;
  let aMagnitude =
    aExponent === 0 ? (aMantissa << 4) + 8 : ((aMantissa << 4) + 0x108) << (aExponent - 1);
  aMagnitude = Math.min(aMagnitude, 32767);
  ALAW_TABLE[i] = a & 0x80 ? aMagnitude : -aMagnitude;
}

export function decodeMulaw(input: Uint8Array): Int16Array {
  const out = new Int16Array(input.length);
  for (let i = 0; i < input.length; i++) out[i] = MULAW_TABLE[input[i] ?? 0xff] ?? 0;
  return out;
}

export function decodeAlaw(input: Uint8Array): Int16Array {
  const out = new Int16Array(input.length);
  for (let i = 0; i < input.length; i++) out[i] = ALAW_TABLE[input[i] ?? 0xd5] ?? 0;
  return out;
}

/** 16-bit little-endian PCM bytes to samples (an odd trailing byte is ignored). */
export function decodePcm16(input: Buffer): Int16Array {
  const out = new Int16Array(input.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = input.readInt16LE(i * 2);
  return out;
}

/** The μ-law byte for digital silence. */
export const MULAW_SILENCE = 0xff;

/** Encodes one linear sample to μ-law (used by tests and the benchmark to make caller audio). */
export function encodeMulaw(sample: number): number {
  const BIAS = 0x84;
  const CLIP = 32635;
  let s = Math.max(-32768, Math.min(32767, Math.round(sample)));
  const sign = s < 0 ? 0x80 : 0;
  if (sign) s = -s;
  s = Math.min(s, CLIP) + BIAS;
  let exponent = 7;
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (s >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}
