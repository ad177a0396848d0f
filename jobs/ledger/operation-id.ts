/**
 * Operation ids: `op_` + 26 characters in Crockford base32, sortable by creation time like a ULID
 * (48-bit millisecond time, 80 random bits). The random bits come from a pool refilled in large
 * draws (as crypto.randomUUID does): a general ULID library draws once per character, and even one
 * draw per id is a system call that showed up in admission profiles.
 */
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const RANDOM_BYTES_PER_ID = 10;
/** Ids whose random bits one draw provides. */
const IDS_PER_DRAW = 256;
const pool = Buffer.alloc(RANDOM_BYTES_PER_ID * IDS_PER_DRAW);
let poolOffset = pool.length;

function randomBytesForId(): Buffer {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + RANDOM_BYTES_PER_ID);
  poolOffset += RANDOM_BYTES_PER_ID;
  return bytes;
}

export function newOperationId(now: number = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = (ALPHABET[t % 32] ?? '0') + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytesForId();
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
