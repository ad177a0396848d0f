/**
 * One Redis for the whole test run: REDIS_URL when set, otherwise a private redis-server that
 * is stopped when the run ends. Tests isolate themselves with a unique key prefix each.
 */
import type { TestProject } from 'vitest/node';
import { resolveRedis } from '../jobs/redis/local-redis.ts';
import './support/provided-context.ts';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const endpoint = await resolveRedis(process.env.REDIS_URL);
  project.provide('redisUrl', endpoint.url);
  return async () => {
    await endpoint.local?.stop();
  };
}
