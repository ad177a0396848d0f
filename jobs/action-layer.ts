/**
 * The durable action layer assembled: what a gateway needs to admit, cancel, compensate and look
 * operations up (the producer side), and what a worker runs (executors, reconciliation,
 * cancellation, the recovery sweep). Both sides share one ledger and one set of queues.
 */
import type { Redis } from 'ioredis';
import type { ZodType } from 'zod';
import { CallgateError } from '../config/errors.ts';
import type { Logger } from '../config/log.ts';
import type { Config } from '../config/schema.ts';
import {
  actionActive,
  actionLeases,
  actionMaxConcurrent,
  compensationOwedOldestAge,
  compensationsOwed,
} from './action-metrics.ts';
import { Admission, type AdmissionDecision, type AdmissionRequest } from './admission/admission.ts';
import {
  Compensator,
  type CompensationDecision,
  type CompensationRequest,
} from './compensation/compensator.ts';
import {
  OwedCompensationPass,
  type CompensationPassReport,
} from './compensation/owed-compensation-pass.ts';
import { Cancellation, CancelProcessor, type CancelDecision } from './execution/cancellation.ts';
import { OperationExecutor } from './execution/operation-executor.ts';
import { waitForOutcome } from './execution/operation-watcher.ts';
import { Reconciler } from './execution/reconciler.ts';
import { RecoverySweep } from './execution/recovery-sweep.ts';
import type { Operation } from './ledger/operation.ts';
import { OperationLedger } from './ledger/operation-ledger.ts';
import type { Provider } from './providers/provider.ts';
import { OutOfBandQueue } from './notify/out-of-band.ts';
import { OutOfBandWorker } from './notify/out-of-band-worker.ts';
import { SandboxSmsSender } from './notify/sandbox-sms-sender.ts';
import { OperationQueues } from './queues/operation-queues.ts';
import { OperationWorkers } from './queues/operation-workers.ts';
import { connect } from './redis/connection.ts';

export interface ActionLayerOptions {
  readonly config: Config;
  readonly redisUrl: string;
  readonly log: Logger;
  /** Providers by name: declarations for admission and cancellation, adapters for workers. */
  readonly providers: ReadonlyMap<string, Provider>;
  /** Argument schemas by action name (from the agents' tool definitions). */
  readonly schemas?: ReadonlyMap<string, ZodType>;
  /** The sandbox whose message sink stands in for SMS (tenants with notify.sms = sandbox). */
  readonly sandboxUrl?: string;
}

export type { CompensationDecision } from './compensation/compensator.ts';

export class ActionLayer {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly admission: Admission;
  readonly cancellation: Cancellation;
  readonly compensator: Compensator;
  readonly outOfBand: OutOfBandQueue;
  private outOfBandWorker: OutOfBandWorker | undefined;
  private workers: OperationWorkers | undefined;
  private sweep: RecoverySweep | undefined;
  private compensationPass: OwedCompensationPass | undefined;
  private workerConnection: Redis | undefined;
  private executionConnection: Redis | undefined;

  private constructor(
    private readonly options: ActionLayerOptions,
    private readonly producer: Redis,
  ) {
    const { config } = options;
    this.ledger = new OperationLedger(producer, {
      prefix: config.redis.prefix,
      retentionDays: config.ledger.retentionDays,
      moneyRetentionDays: config.ledger.moneyRetentionDays,
    });
    this.queues = new OperationQueues(producer, config.redis.prefix);
    this.admission = new Admission({
      config,
      ledger: this.ledger,
      queues: this.queues,
      providers: options.providers,
      schemas: options.schemas,
      log: options.log,
      durability: config.redis.durability,
    });
    this.cancellation = new Cancellation({
      ledger: this.ledger,
      queues: this.queues,
      providers: options.providers,
    });
    this.compensator = new Compensator({
      ledger: this.ledger,
      admission: this.admission,
      log: options.log,
    });
    this.outOfBand = new OutOfBandQueue({
      connection: producer,
      prefix: config.redis.prefix,
      tenants: new Map(config.tenants.map((t) => [t.id, t])),
    });
  }

  /** Connects the producer side (admission, cancellation, lookups). */
  static async open(options: ActionLayerOptions): Promise<ActionLayer> {
    const producer = await connect(options.redisUrl, 'producer');
    return new ActionLayer(options, producer);
  }

  /** Starts executing operations in this process (the worker role). */
  async startWorkers(): Promise<void> {
    const { config, log, providers } = this.options;
    this.workerConnection = await connect(this.options.redisUrl, 'worker');
    // The executors' ledger calls run on their own connection: many jobs at once, none blocking,
    // and not queued behind BullMQ's commands.
    this.executionConnection = await connect(this.options.redisUrl, 'execution');
    const ledger = new OperationLedger(this.executionConnection, {
      prefix: config.redis.prefix,
      retentionDays: config.ledger.retentionDays,
      moneyRetentionDays: config.ledger.moneyRetentionDays,
    });
    const tenants = new Map(config.tenants.map((t) => [t.id, t]));
    const executor = new OperationExecutor({
      ledger,
      queues: this.queues,
      providers,
      actionConfig: (tenantId, action) => tenants.get(tenantId)?.actions[action],
      log,
      leaseTtlMs: config.worker.leaseTtlMs,
      reconcileGraceMs: config.worker.reconcileGraceMs,
      durability: config.redis.durability,
    });
    const reconciler = new Reconciler({
      ledger,
      queues: this.queues,
      providers,
      actionConfig: (tenantId, action) => tenants.get(tenantId)?.actions[action],
      log,
      graceMs: config.worker.reconcileGraceMs,
      backoffMs: config.worker.reconcileBackoffMs,
      maxBackoffMs: config.worker.reconcileMaxBackoffMs,
    });
    const canceller = new CancelProcessor({
      ledger,
      providers,
      log,
      pendingRecheckMs: config.worker.reconcileBackoffMs,
    });
    this.workers = new OperationWorkers({
      connection: this.workerConnection,
      prefix: config.redis.prefix,
      settings: config.worker,
      executor,
      reconciler,
      canceller,
      log,
    });
    this.workers.start();
    this.outOfBandWorker = new OutOfBandWorker({
      connection: this.workerConnection,
      prefix: config.redis.prefix,
      tenants,
      queue: this.outOfBand,
      sandboxSms:
        this.options.sandboxUrl === undefined
          ? undefined
          : new SandboxSmsSender(this.options.sandboxUrl),
      log,
    });
    this.outOfBandWorker.start();
    this.sweep = new RecoverySweep({
      ledger,
      queues: this.queues,
      tenants: config.tenants.map((t) => t.id),
      log,
      intervalMs: config.worker.sweepIntervalMs,
      staleAfterMs: config.worker.staleAfterMs,
      reconcileGraceMs: config.worker.reconcileGraceMs,
    });
    this.sweep.start();
    this.compensationPass = new OwedCompensationPass({
      ledger: this.ledger,
      compensator: this.compensator,
      tenants: config.tenants.map((t) => t.id),
      log,
      intervalMs: config.worker.sweepIntervalMs,
    });
    this.compensationPass.start();
  }

  /** Refreshes the gauges read from Redis (queue depths, active operations and leases per action); called on scrape. */
  async refreshMetrics(): Promise<void> {
    const pairs = this.options.config.tenants.flatMap((t) =>
      Object.entries(t.actions).map(([action, cfg]) => ({
        tenantId: t.id,
        action,
        max: cfg.maxConcurrent,
      })),
    );
    const tenants = this.options.config.tenants.map((t) => t.id);
    const [use, owed] = await Promise.all([
      this.ledger.capacityUse(pairs),
      this.ledger.owedCompensationCounts(tenants),
      this.queues.refreshMetrics(),
      this.outOfBand.refreshMetrics(),
    ]);
    pairs.forEach((pair, i) => {
      actionActive.labels(pair.tenantId, pair.action).set(use[i]?.active ?? 0);
      actionLeases.labels(pair.tenantId, pair.action).set(use[i]?.leases ?? 0);
      actionMaxConcurrent.labels(pair.tenantId, pair.action).set(pair.max);
    });
    const now = Date.now();
    tenants.forEach((tenantId, i) => {
      const { owed: count = 0, oldestSince = 0 } = owed[i] ?? {};
      compensationsOwed.labels(tenantId).set(count);
      compensationOwedOldestAge
        .labels(tenantId)
        .set(count > 0 && oldestSince > 0 ? Math.max(0, now - oldestSince) / 1000 : 0);
    });
  }

  /** Runs one recovery pass now (admin API, tests). */
  async sweepNow(): Promise<void> {
    if (!this.sweep) throw new Error('the recovery sweep runs only where workers run');
    await this.sweep.sweep();
  }

  /** Runs one owed-compensation pass now (tests). */
  async compensationsNow(): Promise<CompensationPassReport> {
    if (!this.compensationPass)
      throw new Error('the owed-compensation pass runs only where workers run');
    return this.compensationPass.pass();
  }

  admit(request: AdmissionRequest): Promise<AdmissionDecision> {
    return this.admission.admit(request);
  }

  cancel(tenantId: string, operationId: string): Promise<CancelDecision> {
    return this.cancellation.request(tenantId, operationId);
  }

  /**
   * Undoes a committed operation with a new one (for example cancel_booking for a booking): it goes
   * through admission like any request and is linked both ways. Asking twice gives the same one; a
   * compensation that cannot be admitted now is owed and admitted later (jobs/compensation/).
   */
  compensate(
    original: Pick<Operation, 'tenantId' | 'operationId'>,
    request: CompensationRequest,
  ): Promise<CompensationDecision> {
    return this.compensator.request(original, request);
  }

  /** Waits until the operation is terminal (or UNKNOWN, if asked), or the timeout passes. */
  waitFor(
    tenantId: string,
    operationId: string,
    timeoutMs: number,
    includeUnknown = false,
  ): Promise<Operation | undefined> {
    return waitForOutcome(this.ledger, tenantId, operationId, { timeoutMs, includeUnknown });
  }

  async get(tenantId: string, operationId: string): Promise<Operation> {
    const op = await this.ledger.get(tenantId, operationId);
    if (!op) throw new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId });
    return op;
  }

  async close(): Promise<void> {
    await this.sweep?.stop();
    await this.compensationPass?.stop();
    await this.workers?.close();
    await this.outOfBandWorker?.close();
    await this.outOfBand.close();
    await this.admission.drain();
    await this.ledger.flushOutbox().catch(() => undefined);
    await this.queues.close();
    await this.ledger.close();
    this.workerConnection?.disconnect();
    this.executionConnection?.disconnect();
    this.producer.disconnect();
  }
}
