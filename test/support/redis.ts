/** Redis for integration tests: the run's shared server, a unique key prefix per test. */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import './provided-context.ts';

export function testRedisUrl(): string {
  return inject('redisUrl');
}

/** A prefix no other test uses, so tests can run in parallel against one Redis. */
export function uniquePrefix(name = 't'): string {
  return `${name}-${randomBytes(5).toString('hex')}`;
}

export function testRedis(): Redis {
  return new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
}

/** Deletes every key under `prefix` (cleanup after a test). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}
