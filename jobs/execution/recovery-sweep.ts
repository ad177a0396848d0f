/**
 * The recovery sweep: the safety net for crashes between two steps.
 *   - an admitted operation whose job was never enqueued (crash between ledger and queue): enqueue it
 *   - an ADMITTED operation whose job failed before it started (its worker died while picking it
 *     up; unsafe queues never redeliver): run it again (the provider was never called)
 *   - a RUNNING operation whose job is gone or failed (its worker died; unsafe queues never
 *     redeliver): UNKNOWN and reconcile if the request may have been sent to a provider that does
 *     not honour idempotency keys (fenced by the lost attempt and its token), otherwise its job is
 *     run again and the executor takes the lost attempt over under the retry policy (attempts,
 *     backoff, budget), as for a redelivered job
 *   - a FAILED_RETRYABLE operation without a job: run again
 *   - an UNKNOWN operation without a reconcile job: reconcile
 * It also refreshes the UNKNOWN gauges.
 */
import type { Logger } from '../../config/log.ts';
import { incWithExemplar } from '../../config/metrics.ts';
import {
  outboxRecovered,
  unknownOldestAge,
  unknownOpen,
  unknownOpened,
} from '../action-metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../ledger/ledger-errors.ts';
import type { Operation } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import type { OperationQueues } from '../queues/operation-queues.ts';
import { errorJson, executionQueueOf } from './operation-executor.ts';

/** An outbox entry younger than this is probably being enqueued right now by its admission. */
const OUTBOX_SETTLE_MS = 1_000;

export interface RecoverySweepOptions {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly tenants: readonly string[];
  readonly log: Logger;
  readonly intervalMs: number;
  readonly staleAfterMs: number;
  readonly reconcileGraceMs: number;
}

export interface SweepReport {
  enqueued: number;
  recovered: number;
  reconciling: number;
}

export class RecoverySweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | undefined;

  constructor(private readonly options: RecoverySweepOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      this.sweep().catch((error: unknown) =>
        this.options.log.error('recovery sweep failed', { error }),
      );
    }, this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One pass over every tenant; concurrent calls share the pass in progress. */
  sweep(): Promise<SweepReport> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<SweepReport> {
    const report: SweepReport = { enqueued: 0, recovered: 0, reconciling: 0 };
    for (const tenantId of this.options.tenants) {
      await this.outbox(tenantId, report);
      await this.stale(tenantId, report);
      await this.unknown(tenantId, report);
    }
    return report;
  }

  private async outbox(tenantId: string, report: SweepReport): Promise<void> {
    const { ledger, queues } = this.options;
    for (const id of await ledger.outbox(tenantId, (await ledger.time()) - OUTBOX_SETTLE_MS)) {
      const op = await ledger.get(tenantId, id);
      if (op?.state === 'ADMITTED') {
        await queues.enqueueExecution(executionQueueOf(op), {
          operationId: id,
          tenantId,
          action: op.action,
        });
        outboxRecovered.labels(op.action).inc();
        report.enqueued++;
        this.options.log.warn('enqueued an admitted operation that had no job', {
          operation_id: id,
        });
      }
      await ledger.clearOutbox(tenantId, id);
    }
  }

  private async stale(tenantId: string, report: SweepReport): Promise<void> {
    const { ledger, queues } = this.options;
    for (const op of await ledger.listOpen(
      tenantId,
      (await ledger.time()) - this.options.staleAfterMs,
    )) {
      if (op.state !== 'ADMITTED' && op.state !== 'RUNNING' && op.state !== 'FAILED_RETRYABLE')
        continue;
      const queue = executionQueueOf(op);
      const jobState = await queues.jobState(queue, op.operationId);
      if (jobState !== 'failed' && jobState !== 'completed' && jobState !== 'missing') continue;
      try {
        await this.recover(op, queue);
        report.recovered++;
      } catch (error) {
        if (!(error instanceof IllegalTransitionError || error instanceof StaleAttemptError))
          throw error;
      }
    }
  }

  private async recover(op: Operation, queue: ReturnType<typeof executionQueueOf>): Promise<void> {
    const { ledger, queues, log } = this.options;
    const data = { operationId: op.operationId, tenantId: op.tenantId, action: op.action };
    if (op.state === 'RUNNING' && op.sending && !(op.providerIdempotent || op.kind === 'read')) {
      await ledger.transition(op, {
        from: ['RUNNING'],
        to: 'UNKNOWN',
        attempt: op.attempt,
        token: op.attemptToken,
        actor: 'sweeper',
        reason: 'worker_lost_while_sending',
        fields: { error: errorJson('outcome_unknown', 'the worker died after sending') },
      });
      incWithExemplar(
        unknownOpened,
        { action: op.action },
        { operation_id: op.operationId, session_id: op.scope.sessionId },
      );
      await queues.enqueueReconcile({ ...data, tries: 0, reason: 'worker_lost_while_sending' }, 0);
      log.warn('worker lost while sending; reconciling', { operation_id: op.operationId });
      return;
    }
    await queues.requeueExecution(queue, data);
    log.warn('re-running an operation whose worker was lost', {
      operation_id: op.operationId,
      state: op.state,
    });
  }

  private async unknown(tenantId: string, report: SweepReport): Promise<void> {
    const { ledger, queues } = this.options;
    const rows = await ledger.listUnknown(tenantId);
    unknownOpen.labels(tenantId).set(rows.length);
    const oldest = rows.reduce((min, row) => Math.min(min, row.since), Number.POSITIVE_INFINITY);
    unknownOldestAge
      .labels(tenantId)
      .set(rows.length === 0 ? 0 : ((await ledger.time()) - oldest) / 1000);
    for (const { operation } of rows) {
      if ((await ledger.rawField(operation, 'reconcile_stuck')) === '1') continue;
      await queues.enqueueReconcile(
        { operationId: operation.operationId, tenantId, tries: 0, reason: 'sweep' },
        0,
      );
      report.reconciling++;
    }
  }
}
