/**
 * Base64 (RFC 4648 §4, the standard alphabet) between byte buffers, with no string in between.
 * The realtime wire carries audio as base64 inside JSON text; going through a string for each
 * 20 ms frame out and each delta in is garbage that, at hundreds of calls, triggers scavenges.
 */

const ALPHABET = Buffer.from(
  'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/',
  'latin1',
);
const EQUALS = 0x3d;

/** Each alphabet byte's value; -1 for any other byte. */
const VALUES = ((): Int8Array => {
  const table = new Int8Array(256).fill(-1);
  ALPHABET.forEach((byte, value) => {
    table[byte] = value;
  });
  return table;
})();

/** The length of the padded base64 text for `bytes` bytes. */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/**
 * Writes `source` as padded base64 into `target` at `offset` (which must have room for
 * base64Length(source.length) bytes); the same text as source.toString('base64').
 */
export function encodeBase64Into(source: Uint8Array, target: Uint8Array, offset: number): void {
  const whole = source.length - (source.length % 3);
  let out = offset;
  for (let at = 0; at < whole; at += 3) {
    const bits = ((source[at] ?? 0) << 16) | ((source[at + 1] ?? 0) << 8) | (source[at + 2] ?? 0);
    target[out++] = ALPHABET[bits >> 18] ?? 0;
    target[out++] = ALPHABET[(bits >> 12) & 0x3f] ?? 0;
    target[out++] = ALPHABET[(bits >> 6) & 0x3f] ?? 0;
    target[out++] = ALPHABET[bits & 0x3f] ?? 0;
  }
  const rest = source.length - whole;
  if (rest === 0) return;
  const bits = ((source[whole] ?? 0) << 16) | (rest === 2 ? (source[whole + 1] ?? 0) << 8 : 0);
  target[out++] = ALPHABET[bits >> 18] ?? 0;
  target[out++] = ALPHABET[(bits >> 12) & 0x3f] ?? 0;
  target[out++] = rest === 2 ? (ALPHABET[(bits >> 6) & 0x3f] ?? 0) : EQUALS;
  target[out] = EQUALS;
}

/**
 * Decodes the canonical base64 in text[start, end) (the standard alphabet, padded to a multiple
 * of four) into a new Buffer; undefined for anything else (line breaks, base64url, missing
 * padding), which Buffer.from(text, 'base64') reads leniently and so is left to it.
 */
export function decodeBase64(text: Uint8Array, start: number, end: number): Buffer | undefined {
  const length = end - start;
  if (length % 4 !== 0) return undefined;
  let padding = 0;
  if (length > 0 && text[end - 1] === EQUALS) padding = text[end - 2] === EQUALS ? 2 : 1;
  const bytes = Buffer.allocUnsafe((length / 4) * 3 - padding);
  const fullEnd = padding === 0 ? end : end - 4;
  let out = 0;
  for (let at = start; at < fullEnd; at += 4) {
    const a = VALUES[text[at] ?? 0] ?? -1;
    const b = VALUES[text[at + 1] ?? 0] ?? -1;
    const c = VALUES[text[at + 2] ?? 0] ?? -1;
    const d = VALUES[text[at + 3] ?? 0] ?? -1;
    if ((a | b | c | d) < 0) return undefined;
    const bits = (a << 18) | (b << 12) | (c << 6) | d;
    bytes[out++] = bits >> 16;
    bytes[out++] = (bits >> 8) & 0xff;
    bytes[out++] = bits & 0xff;
  }
  if (padding > 0) {
    const a = VALUES[text[fullEnd] ?? 0] ?? -1;
    const b = VALUES[text[fullEnd + 1] ?? 0] ?? -1;
    const c = padding === 1 ? (VALUES[text[fullEnd + 2] ?? 0] ?? -1) : 0;
    if ((a | b | c) < 0) return undefined;
    const bits = (a << 18) | (b << 12) | (c << 6);
    bytes[out++] = bits >> 16;
    if (padding === 1) bytes[out++] = (bits >> 8) & 0xff;
  }
  return bytes;
}
