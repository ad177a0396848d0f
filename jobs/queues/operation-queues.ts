/**
 * The BullMQ queues of the action layer and the producer side of them. One queue per action class:
 * reads, mutations on providers that honour idempotency keys, and mutations on providers that do
 * not ("unsafe": never redelivered after a stall, see OperationWorker), plus reconcile and cancel.
 * BullMQ's job-id dedupe is a convenience here; the ledger is the idempotency record.
 */
import { Queue, type Job, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { queueJobs } from '../action-metrics.ts';

export const EXECUTION_QUEUES = ['ops-reads', 'ops-mutations', 'ops-mutations-unsafe'] as const;
export type ExecutionQueueName = (typeof EXECUTION_QUEUES)[number];
export const RECONCILE_QUEUE = 'ops-reconcile';
export const CANCEL_QUEUE = 'ops-cancel';
export type QueueName = ExecutionQueueName | typeof RECONCILE_QUEUE | typeof CANCEL_QUEUE;

export interface OperationJobData {
  readonly operationId: string;
  readonly tenantId: string;
  /**
   * The operation's action, so that a worker can begin the attempt in the step that reads the
   * operation (the action names the lease). Jobs without it are read first.
   */
  readonly action?: string;
}

export interface ReconcileJobData extends OperationJobData {
  /** Lookups made so far (for backoff). */
  readonly tries: number;
  readonly reason: string;
}

/** Finished jobs are kept briefly for inspection; the ledger is the lasting record. */
const KEEP_COMPLETED = { age: 3_600, count: 10_000 };
const KEEP_FAILED = { age: 7 * 86_400 };

/**
 * Tries of one cancel job when the provider's cancel call fails (unreachable, 5xx, unreadable),
 * with a doubling delay from CANCEL_BACKOFF_MS: 250 ms .. 32 s, about 64 s in all, which outlasts
 * an operation's default deadline (60 s, config deadlineMs). After that the request it was meant
 * to stop has ended anyway, and each try first checks that the operation is still running.
 */
const CANCEL_ATTEMPTS = 9;
const CANCEL_BACKOFF_MS = 250;

/** States of a job that will still run (or is running); any other is done with, or gone. */
const LIVE_JOB_STATES: ReadonlySet<string> = new Set([
  'waiting',
  'delayed',
  'prioritized',
  'active',
  'waiting-children',
]);

export function executionQueueFor(
  kind: 'read' | 'mutation',
  providerIdempotent: boolean,
): ExecutionQueueName {
  if (kind === 'read') return 'ops-reads';
  return providerIdempotent ? 'ops-mutations' : 'ops-mutations-unsafe';
}

/** BullMQ key prefix with a hash tag, so each queue's keys share a Redis Cluster slot. */
export function bullPrefix(prefix: string): string {
  return `{${prefix}-bull}`;
}

export class OperationQueues {
  private readonly queues = new Map<QueueName, Queue>();

  constructor(
    private readonly connection: Redis,
    readonly prefix: string,
  ) {
    for (const name of [...EXECUTION_QUEUES, RECONCILE_QUEUE, CANCEL_QUEUE] as const) {
      this.queues.set(name, new Queue(name, { connection, prefix: bullPrefix(prefix) }));
    }
  }

  queue(name: QueueName): Queue {
    const queue = this.queues.get(name);
    if (!queue) throw new Error(`no queue ${name}`);
    return queue;
  }

  /** Enqueues execution with job id = operation id; a second call for the same id adds nothing. */
  async enqueueExecution(
    queue: ExecutionQueueName,
    data: OperationJobData,
    delayMs = 0,
  ): Promise<void> {
    const options: JobsOptions = {
      jobId: data.operationId,
      attempts: 1,
      removeOnComplete: KEEP_COMPLETED,
      removeOnFail: KEEP_FAILED,
    };
    if (delayMs > 0) options.delay = delayMs;
    await this.queue(queue).add('execute', data, options);
  }

  /**
   * Re-runs an operation whose job finished (failed after a stall, or completed after a lost
   * outcome): the finished job is retried or replaced under the same id.
   */
  async requeueExecution(
    queue: ExecutionQueueName,
    data: OperationJobData,
    delayMs = 0,
  ): Promise<void> {
    const existing = await this.queue(queue).getJob(data.operationId);
    if (existing) {
      const state = await existing.getState();
      if (state === 'failed') {
        await existing.retry('failed');
        return;
      }
      if (state === 'completed') await existing.remove();
      else return; // waiting, delayed or active: it will run
    }
    await this.enqueueExecution(queue, data, delayMs);
  }

  /** One reconcile job per operation; `promote` runs a waiting one now (an operator's request). */
  async enqueueReconcile(data: ReconcileJobData, delayMs: number, promote = false): Promise<void> {
    const queue = this.queue(RECONCILE_QUEUE);
    const jobId = `rc-${data.operationId}`;
    const existing = await queue.getJob(jobId);
    if (existing) {
      const state = await existing.getState();
      if (state === 'delayed' && promote) await existing.promote();
      if (state !== 'completed' && state !== 'failed') return;
      await existing.remove();
    }
    await queue.add('reconcile', data, {
      jobId,
      delay: delayMs,
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: KEEP_FAILED,
    });
  }

  /**
   * One cancel job per operation. A job still waiting, delayed or running will ask the provider;
   * one that finished or gave up is replaced, so a new request is really sent (BullMQ would ignore
   * an add under the id of a job it still keeps).
   */
  async enqueueCancel(data: OperationJobData): Promise<void> {
    const queue = this.queue(CANCEL_QUEUE);
    const jobId = `cx-${data.operationId}`;
    const existing = await queue.getJob(jobId);
    if (existing) {
      if (LIVE_JOB_STATES.has(await existing.getState())) return;
      await queue.remove(jobId);
    }
    await queue.add('cancel', data, {
      jobId,
      attempts: CANCEL_ATTEMPTS,
      backoff: { type: 'exponential', delay: CANCEL_BACKOFF_MS },
      removeOnComplete: true,
      removeOnFail: KEEP_FAILED,
    });
  }

  async removeWaitingExecution(queue: ExecutionQueueName, operationId: string): Promise<void> {
    const job: Job | undefined = await this.queue(queue).getJob(operationId);
    if (!job) return;
    const state = await job.getState();
    if (state === 'waiting' || state === 'delayed' || state === 'prioritized')
      await job.remove().catch(() => undefined);
  }

  async jobState(queue: ExecutionQueueName, operationId: string): Promise<string> {
    const job = await this.queue(queue).getJob(operationId);
    return job ? job.getState() : 'missing';
  }

  /** Refreshes the queue depth gauges (called on scrape). */
  async refreshMetrics(): Promise<void> {
    await Promise.all(
      [...this.queues.entries()].map(async ([name, queue]) => {
        const counts = await queue.getJobCounts(
          'waiting',
          'prioritized',
          'delayed',
          'active',
          'failed',
        );
        for (const [state, count] of Object.entries(counts))
          queueJobs.labels(name, state).set(count);
      }),
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
