/** A real worker process (jobs/worker-main.ts) on a harness's configuration, started and ready. */
import type { Harness } from './action-harness.ts';
import { startTs, waitFor, type StartedProcess } from './processes.ts';

export interface WorkerProcessOptions {
  /** Redis to use instead of the harness's (after a failover, the promoted replica). */
  readonly redisUrl?: string;
  /** A command that execs node in the same process (setpriv, nice); not one that forks (faketime). */
  readonly prefix?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
}

export async function startWorkerProcess(
  h: Harness,
  options: WorkerProcessOptions = {},
): Promise<StartedProcess> {
  const worker = startTs('jobs/worker-main.ts', {
    prefix: options.prefix,
    env: {
      CALLGATE_CONFIG: h.configPath,
      CALLGATE_HTTP_PORT: '0',
      CALLGATE__http__operator__port: '0',
      CALLGATE_LOG_LEVEL: 'info',
      REDIS_URL: options.redisUrl ?? h.config.redis.url ?? '',
      ...options.env,
    },
  });
  try {
    await waitFor(
      async () => (worker.stdout().includes('worker ready') ? true : undefined),
      30_000,
      'the worker process',
    );
  } catch (error) {
    worker.kill();
    throw new Error(`${(error as Error).message}\n${worker.output().slice(-2_000)}`);
  }
  return worker;
}

/** Stops a worker process: SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
export async function stopWorkerProcess(worker: StartedProcess, graceMs = 5_000): Promise<void> {
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  worker.child.kill('SIGCONT');
  worker.child.kill('SIGTERM');
  const stopped = await Promise.race([
    worker.exited.then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), graceMs)),
  ]);
  if (!stopped) worker.kill();
  await worker.exited;
}
