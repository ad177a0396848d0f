/**
 * Redis connections as BullMQ's production guidance has them: workers (blocking commands) wait
 * for Redis forever (`maxRetriesPerRequest: null`), producers fail fast so that a call never waits
 * on a Redis that is down (`enableOfflineQueue: false`, a bounded retry count).
 */
import { Redis, type RedisOptions } from 'ioredis';
import { CallgateError } from '../../config/errors.ts';

/**
 * worker: BullMQ workers (blocking commands); producer: admission, lookups, queue adds;
 * execution: the ledger calls of running jobs (no blocking commands).
 */
export type ConnectionRole = 'worker' | 'producer' | 'execution';

/** How long the startup check waits for PING before it reports Redis as unreachable. */
const STARTUP_CHECK_TIMEOUT_MS = 3_000;

export function connectionOptions(role: ConnectionRole): RedisOptions {
  const common: RedisOptions = {
    connectionName: `callgate-${role}`,
    // Reconnect with a capped backoff; BullMQ resumes once the connection is back.
    retryStrategy: (times) => Math.min(times * 200, 5_000),
  };
  switch (role) {
    case 'worker':
      return { ...common, maxRetriesPerRequest: null, enableReadyCheck: true };
    case 'execution':
      // A running job waits for Redis rather than failing its attempt.
      return { ...common, maxRetriesPerRequest: null };
    case 'producer':
      // Producers serve many calls at once (their commands of one tick share a write, see coalesceWrites).
      // No auto-pipelining: each pipeline copies every script defined on the connection, and BullMQ
      // defines dozens on it.
      return {
        ...common,
        maxRetriesPerRequest: 2,
        enableOfflineQueue: false,
        connectTimeout: 5_000,
        enableAutoPipelining: false,
      };
  }
}

/** A connection for the role; producers connect before returning so the offline queue is never needed. */
export async function connect(url: string, role: ConnectionRole): Promise<Redis> {
  const redis = new Redis(url, { ...connectionOptions(role), lazyConnect: true });
  redis.on('error', () => {
    // Errors surface through commands and readiness checks; an unhandled 'error' must not crash.
  });
  coalesceWrites(redis);
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw unreachable(url, error);
  }
  return redis;
}

/**
 * Commands written in one tick leave in one system call: the socket is corked at the first write
 * of a tick and uncorked on the next tick, before any I/O, so no command waits on the network for
 * it. ioredis otherwise writes each command on its own; its auto-pipelining does the same batching
 * with a pipeline object per tick that copies every script defined on the connection (BullMQ
 * defines dozens). On loopback the system call per command cost more CPU, here and in Redis, than
 * the command. Applied to every socket the connection opens (reconnects get a new one).
 */
function coalesceWrites(redis: Redis): void {
  redis.on('connect', () => {
    const stream = redis.stream;
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    let corked = false;
    const uncork = () => {
      corked = false;
      stream.uncork();
    };
    stream.write = (...args: unknown[]) => {
      if (!corked) {
        corked = true;
        stream.cork();
        process.nextTick(uncork);
      }
      return write(...args);
    };
  });
}

/** Fails with a clear error naming the URL (without its password) when Redis does not answer. */
export async function checkRedis(url: string, timeoutMs = STARTUP_CHECK_TIMEOUT_MS): Promise<void> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await withTimeout(
      redis.connect().then(() => redis.ping()),
      timeoutMs,
    );
  } catch (error) {
    throw unreachable(url, error);
  } finally {
    redis.disconnect();
  }
}

function unreachable(url: string, error: unknown): CallgateError {
  const reason = error instanceof Error ? error.message : String(error);
  return new CallgateError(
    'CALLGATE_ERR_REDIS_UNREACHABLE',
    { url: safeRedisUrl(url), reason },
    { cause: error },
  );
}

/** The URL with any password replaced, for logs and error messages. */
export function safeRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return '(unparseable Redis URL)';
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
