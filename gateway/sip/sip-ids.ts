/**
 * Identifiers callgate generates: tags, branches and Call-IDs. They must be globally unique and
 * unguessable (RFC 3261 sections 8.1.1.4, 8.1.1.7, 19.3), so they come from the CSPRNG.
 */
import { randomBytes } from 'node:crypto';
import { BRANCH_MAGIC_COOKIE } from './message-types.ts';

/** Random bytes are drawn in batches: one syscall per few hundred ids keeps a call burst cheap. */
const POOL_BYTES = 4096;
let pool = randomBytes(POOL_BYTES);
let offset = 0;

function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const text = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return text;
}

export function newTag(): string {
  return randomHex(8);
}

export function newBranch(): string {
  return `${BRANCH_MAGIC_COOKIE}${randomHex(10)}`;
}

export function newCallId(host: string): string {
  return `${randomHex(12)}@${host}`;
}
