/**
 * The worker side of the action layer without BullMQ workers: a ledger, queues, executors, the
 * reconciler and the cancel processor on the run's Redis under a prefix of their own, so a test
 * drives each attempt, reconcile and cancel itself, in the order a race needs.
 */
import type { Redis } from 'ioredis';
import { ulid } from 'ulid';
import { actionSchema, type ActionConfig } from '../../../config/schema.ts';
import { Cancellation, CancelProcessor } from '../../../jobs/execution/cancellation.ts';
import { OperationExecutor } from '../../../jobs/execution/operation-executor.ts';
import { Reconciler } from '../../../jobs/execution/reconciler.ts';
import { OperationLedger } from '../../../jobs/ledger/operation-ledger.ts';
import type { Provider } from '../../../jobs/providers/provider.ts';
import { OperationQueues } from '../../../jobs/queues/operation-queues.ts';
import { quietLog } from '../../support/action-harness.ts';
import { newOperation } from '../../support/operations.ts';
import { deletePrefix, testRedis, uniquePrefix } from '../../support/redis.ts';

export const TENANT = 'tenant-x';

export interface ExecutorFixtureOptions {
  readonly provider: Provider;
  /** The action's settings over a mutation of `provider` with fast retries. */
  readonly action?: Record<string, unknown>;
  readonly leaseTtlMs?: number;
}

export interface ExecutorFixture {
  /** The fixture's connection, for looking at keys directly. */
  readonly redis: Redis;
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly action: ActionConfig;
  readonly cancellation: Cancellation;
  readonly reconciler: Reconciler;
  readonly canceller: CancelProcessor;
  /** A new executor: each stands for one worker process. */
  executor(): OperationExecutor;
  /** Admits an operation of the action; returns its id. */
  admit(): Promise<string>;
  close(): Promise<void>;
}

export const ACTION_NAME = 'refund';

export function startExecutorFixture(options: ExecutorFixtureOptions): ExecutorFixture {
  const redis = testRedis();
  const prefix = uniquePrefix('exec');
  const ledger = new OperationLedger(redis, { prefix, retentionDays: 7, moneyRetentionDays: 400 });
  const queues = new OperationQueues(redis, prefix);
  const { provider } = options;
  const action = actionSchema.parse({
    kind: 'mutation',
    provider: provider.name,
    operation: ACTION_NAME,
    maxConcurrent: 4,
    retry: {
      maxAttempts: 5,
      backoffMs: 10,
      maxBackoffMs: 20,
      budgetRatio: 1,
      budgetWindowSeconds: 60,
      budgetMinRetries: 10,
    },
    ...options.action,
  });
  const providers = new Map([[provider.name, provider]]);
  const reconciler = new Reconciler({
    ledger,
    queues,
    providers,
    actionConfig: () => action,
    log: quietLog,
    graceMs: 0,
    backoffMs: 10,
    maxBackoffMs: 100,
  });
  return {
    redis,
    ledger,
    queues,
    action,
    cancellation: new Cancellation({ ledger, queues, providers }),
    reconciler,
    canceller: new CancelProcessor({ ledger, providers, log: quietLog, pendingRecheckMs: 10 }),
    executor: () =>
      new OperationExecutor({
        ledger,
        queues,
        providers,
        actionConfig: () => action,
        log: quietLog,
        leaseTtlMs: options.leaseTtlMs ?? 60_000,
        reconcileGraceMs: 0,
      }),
    admit: async () => {
      const now = Date.now();
      const spec = newOperation({
        tenantId: TENANT,
        action: ACTION_NAME,
        provider: provider.name,
        providerOperation: ACTION_NAME,
        params: { order_id: `ord_${ulid()}`, amount_cents: 100 },
        providerIdempotent: provider.honoursIdempotencyKeys,
        money: true,
        admissionDeadlineAt: now + 60_000,
        deadlineAt: now + 60_000,
      });
      const admitted = await ledger.admit(spec);
      if (admitted.type !== 'admitted') throw new Error(`not admitted: ${admitted.type}`);
      return spec.operationId;
    },
    close: async () => {
      await queues.close();
      await deletePrefix(redis, prefix);
      await deletePrefix(redis, `{${prefix}-bull}`);
      redis.disconnect();
    },
  };
}

/** The job a worker would run for `operationId`. */
export function jobOf(operationId: string): {
  tenantId: string;
  operationId: string;
  action: string;
} {
  return { tenantId: TENANT, operationId, action: ACTION_NAME };
}

export const NO_SIGNAL = new AbortController().signal;
