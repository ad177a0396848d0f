/**
 * Operation ids: `op_` + 26 characters in Crockford base32, sortable by creation time like a ULID
 * (48-bit millisecond time, 80 random bits). Made from one random draw per id; a general ULID
 * library draws once per character, which showed up in admission profiles.
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function newOperationId(now: number = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = (ALPHABET[t % 32] ?? '0') + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(10);
  let random = '';
  // 80 bits in 16 characters of 5 bits each.
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      random += ALPHABET[(buffer >> bits) & 31] ?? '0';
    }
    buffer &= (1 << bits) - 1;
  }
  return `op_${time}${random}`;
}
