/**
 * The BullMQ workers of the action layer: one per execution queue, plus reconcile and cancel.
 * Jobs that must wait (no tenant lease, a scheduled retry, a reconcile backoff) are moved back to
 * delayed with BullMQ's DelayedError, which spends no attempt.
 *
 * The unsafe queue (providers that do not honour idempotency keys) runs with maxStalledCount 0: a
 * job whose worker died is never redelivered to the provider; the recovery sweep finds it and
 * reconciles. Other queues allow one redelivery, which the executor turns into a fenced takeover.
 */
import { setMaxListeners } from 'node:events';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../../config/log.ts';
import type { WorkerConfig } from '../../config/schema.ts';
import type { CancelProcessor } from '../execution/cancellation.ts';
import type { OperationExecutor } from '../execution/operation-executor.ts';
import type { Reconciler } from '../execution/reconciler.ts';
import {
  bullPrefix,
  CANCEL_QUEUE,
  EXECUTION_QUEUES,
  RECONCILE_QUEUE,
  type OperationJobData,
  type ReconcileJobData,
} from './operation-queues.ts';
import { closeWorker } from './close-worker.ts';

export interface OperationWorkersOptions {
  readonly connection: Redis;
  readonly prefix: string;
  readonly settings: WorkerConfig;
  readonly executor: OperationExecutor;
  readonly reconciler: Reconciler;
  readonly canceller: CancelProcessor;
  readonly log: Logger;
}

export class OperationWorkers {
  private readonly workers: Worker[] = [];
  private readonly abort = new AbortController();

  constructor(private readonly options: OperationWorkersOptions) {}

  start(): void {
    const { settings, connection, prefix, log } = this.options;
    // Every running attempt listens on the shared stop signal (and unhooks when it ends): as many
    // listeners as jobs may run at once across the execution queues, which is not a leak.
    setMaxListeners(EXECUTION_QUEUES.length * settings.concurrency + 10, this.abort.signal);
    const common = {
      connection,
      prefix: bullPrefix(prefix),
      lockDuration: settings.lockDurationMs,
      stalledInterval: settings.stalledIntervalMs,
    };
    for (const name of EXECUTION_QUEUES) {
      const worker = new Worker<OperationJobData>(name, (job, token) => this.execute(job, token), {
        ...common,
        concurrency: settings.concurrency,
        maxStalledCount: name === 'ops-mutations-unsafe' ? 0 : 1,
      });
      this.track(worker, name);
    }
    this.track(
      new Worker<ReconcileJobData>(RECONCILE_QUEUE, (job, token) => this.reconcile(job, token), {
        ...common,
        concurrency: Math.max(1, Math.floor(settings.concurrency / 2)),
        maxStalledCount: 5,
      }),
      RECONCILE_QUEUE,
    );
    this.track(
      new Worker<OperationJobData>(CANCEL_QUEUE, (job, token) => this.cancel(job, token), {
        ...common,
        concurrency: 4,
        maxStalledCount: 5,
      }),
      CANCEL_QUEUE,
    );
    log.info('operation workers started', { concurrency: settings.concurrency });
  }

  private track(worker: Worker, name: string): void {
    worker.on('error', (error) => this.options.log.error('worker error', { queue: name, error }));
    worker.on('failed', (job, error) => {
      if (error instanceof DelayedError) return;
      this.options.log.warn('job failed', { queue: name, job_id: job?.id, error: error.message });
    });
    this.workers.push(worker);
  }

  private async execute(job: Job<OperationJobData>, token: string | undefined): Promise<string> {
    const outcome = await this.options.executor.execute(job.data, this.abort.signal);
    if (outcome.type === 'delay') return this.delay(job, token, outcome.delayMs);
    return outcome.state ?? outcome.note ?? 'done';
  }

  private async reconcile(job: Job<ReconcileJobData>, token: string | undefined): Promise<string> {
    const outcome = await this.options.reconciler.reconcile(
      job.data.tenantId,
      job.data.operationId,
      job.data.tries,
    );
    if (outcome.type === 'again') {
      await job.updateData({ ...job.data, tries: job.data.tries + 1, reason: outcome.reason });
      await this.delay(job, token, outcome.delayMs);
    }
    return outcome.type === 'resolved' ? outcome.state : outcome.reason;
  }

  private async cancel(job: Job<OperationJobData>, token: string | undefined): Promise<string> {
    const outcome = await this.options.canceller.process(job.data.tenantId, job.data.operationId);
    if (outcome.type === 'again') await this.delay(job, token, outcome.delayMs);
    return outcome.type === 'done' ? outcome.note : 'again';
  }

  private async delay(job: Job, token: string | undefined, delayMs: number): Promise<never> {
    await job.moveToDelayed(Date.now() + Math.max(1, delayMs), token);
    throw new DelayedError();
  }

  /** Stops taking jobs; running attempts finish (bounded by the caller's drain limit). */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => closeWorker(w)));
    this.abort.abort();
  }
}
