/**
 * One chaos run: a Redis primary and replica behind a proxy, the sandbox behind a fault proxy, a
 * webhook receiver, worker and gateway processes in slots, simulated calls sent to the gateways,
 * the seeded faults of fault-schedule.ts, then a bounded settle (faults stopped, calls ended,
 * reconciles and deadlines given their time) and the checker over everything that happened.
 * See README.md for the sequence and its pitfalls.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { Logger } from '../../config/log.ts';
import { LedgerKeys } from '../../jobs/ledger/keys.ts';
import { OperationLedger } from '../../jobs/ledger/operation-ledger.ts';
import type { HistoryEntry, Operation } from '../../jobs/ledger/operation.ts';
import { NOTIFY_QUEUE } from '../../jobs/notify/out-of-band-message.ts';
import { bullPrefix } from '../../jobs/queues/operation-queues.ts';
import type {
  ConcurrencyReport,
  SandboxEffect,
} from '../../jobs/providers/sandbox/effect-journal.ts';
import type { SinkMessage } from '../../jobs/providers/sandbox/message-sink.ts';
import { startSandbox, type RunningSandbox } from '../../jobs/providers/sandbox/sandbox-server.ts';
import { CALL_STAY_MAX_MS, CallPlanner, type TenantPlan } from './call-plan.ts';
import {
  ProcessPool,
  LIBFAKETIME,
  isRunning,
  type ChaosProcess,
  type ProcessRole,
} from './chaos-processes.ts';
import {
  check,
  INVARIANTS,
  type ActionLimit,
  type CheckResult,
  type Invariant,
  type LedgerView,
  type TimeWindow,
} from './checker.ts';
import { FaultProxy } from './fault-proxy.ts';
import { planFaults, type FaultKind, type ScheduledFault } from './fault-schedule.ts';
import { readJournals } from './journal.ts';
import { RedisPair } from './redis-pair.ts';
import { SeededRandom } from './seeded-random.ts';
import { WebhookReceiver } from './webhook-receiver.ts';

export interface ChaosOptions {
  readonly minutes: number;
  readonly seed: number;
  /** Calls placed per minute across the gateways. */
  readonly callsPerMinute?: number;
  /** Only these kinds of the seeded schedule are made (all when unset; none when empty). */
  readonly faultKinds?: readonly FaultKind[];
  /** Keep the run directory (journals, process logs, configuration) for a look afterwards. */
  readonly keep?: boolean;
  /** Progress lines; silent when unset. */
  readonly progress?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly minutes: number;
  readonly faults: Record<FaultKind, number>;
  /** Faults of the schedule that could not be made (e.g. clock offsets without libfaketime). */
  readonly skippedFaults: Record<string, number>;
  /** Provider requests the fault proxy acted on, by what it did (hold, reject, drop_answer, error_after_forward). */
  readonly proxiedRequests: Record<string, number>;
  readonly calls: number;
  /** Intents whose call reached the tool runtime at least once (a call lost with its gateway before that asked for nothing). */
  readonly intents: number;
  readonly operations: { readonly total: number; readonly byState: Record<string, number> };
  readonly effects: number;
  readonly settledAfterMs: number;
  /** The settle bound passed with operations still open or messages still queued. */
  readonly settleTimedOut: boolean;
  readonly unexpectedExits: readonly string[];
  readonly result: CheckResult;
  readonly runDir?: string;
}

const PREFIX = 'chaos';
/** After a Redis fault ends, clients need up to this long to reconnect (ioredis retry backoff). */
const REDIS_RECONNECT_MS = 1_000;
const TENANTS: readonly TenantPlan[] = [
  { tenantId: 'chaos-a' },
  { tenantId: 'chaos-b', confirmAbove: 0 },
];
const WEBHOOK_SECRET_ENV = 'CHAOS_WEBHOOK_SECRET';
/** Processes per role: one can die while the other carries on. */
const SLOTS = 2;
/** Calls are placed, and faults made, after this warm-up. */
const WARM_UP_MS = 3_000;
/**
 * The timings of the run's configuration, short so recoveries happen within a run: a worker pause
 * must outlast the lock, a gateway pause the dead threshold, a held request the timeout and the grace.
 */
const TIMINGS = {
  providerTimeoutMs: 1_500,
  lockDurationMs: 2_000,
  deadAfterMs: 3_000,
  heartbeatMs: 500,
  /** Above the provider timeout, as the configuration requires. */
  reconcileGraceMs: 4_000,
  /** An operation is not worth doing after this; the settle waits for it. */
  deadlineMs: 30_000,
};
/** The longest a planned call lasts: up to six tool calls at most 1.5 s apart, then its stay on the line. */
const LONGEST_CALL_MS = CALL_STAY_MAX_MS + 10_000;
/** The settle's bound: deadlines, reconciles with backoff, out-of-band retries. */
const SETTLE_LIMIT_MS = 90_000;
/** How often the settle looks at the ledger and the notify queue. */
const SETTLE_POLL_MS = 1_000;

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const run = new ChaosRun(options);
  const onSignal = () => {
    run.abort();
    process.exit(130);
  };
  // SIGINT (Ctrl-C) and SIGTERM (a CI timeout) leave no process and no directory behind.
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await run.execute();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await run.cleanup();
  }
}

class ChaosRun {
  private readonly random: SeededRandom;
  private readonly dir = mkdtempSync(join(tmpdir(), 'callgate-chaos-'));
  private readonly progress: (line: string) => void;
  private redis: RedisPair | undefined;
  private sandbox: RunningSandbox | undefined;
  private proxy: FaultProxy | undefined;
  private readonly webhook = new WebhookReceiver();
  private pool: ProcessPool | undefined;
  private readonly slots: Record<ProcessRole, (ChaosProcess | undefined)[]> = {
    worker: [],
    gateway: [],
  };
  /** Slots whose process a fault is replacing right now (the supervisor leaves them alone). */
  private readonly replacing = new Set<string>();
  private readonly faults = {} as Record<FaultKind, number>;
  private readonly skipped: Record<string, number> = {};
  /** When Redis was away, for the checker (see REDIS_RECONNECT_MS). */
  private readonly ledgerOutages: TimeWindow[] = [];
  private readonly gatewayKills: { gatewayId: string; at: number }[] = [];
  private calls = 0;
  private supervisor: NodeJS.Timeout | undefined;

  constructor(private readonly options: ChaosOptions) {
    this.random = new SeededRandom(options.seed);
    this.progress = options.progress ?? (() => undefined);
  }

  async execute(): Promise<ChaosReport> {
    const runMs = Math.round(this.options.minutes * 60_000);
    this.redis = await RedisPair.start();
    this.sandbox = await startSandbox({ log: new Logger({ level: 'error' }) });
    this.proxy = new FaultProxy(this.sandbox.url);
    await this.proxy.listen();
    await this.webhook.start();
    const configPath = this.writeConfig();
    this.pool = new ProcessPool({
      dir: this.dir,
      env: {
        CALLGATE_CONFIG: configPath,
        REDIS_URL: this.redis.url,
        CHAOS_JOURNAL_DIR: this.dir,
        CALLGATE_LOG_LEVEL: 'info',
        [WEBHOOK_SECRET_ENV]: 'chaos-secret',
      },
    });
    for (let slot = 0; slot < SLOTS; slot++) {
      this.slots.worker[slot] = this.pool.start('worker', slot);
      this.slots.gateway[slot] = this.pool.start('gateway', slot);
    }
    const pool = this.pool;
    const ready = await Promise.all(
      [...this.slots.worker, ...this.slots.gateway].map((p) =>
        p ? pool.waitReady(p) : Promise.resolve(false),
      ),
    );
    if (!ready.every(Boolean))
      throw new Error(`processes did not start: see the logs in ${this.dir}`);
    this.progress(
      `started: redis ${this.redis.url} (primary and replica), sandbox ${this.sandbox.url} behind ${this.proxy.url}, ${SLOTS} workers, ${SLOTS} gateways`,
    );
    this.supervisor = setInterval(() => this.supervise(), 1_000);

    const planner = new CallPlanner(this.random.fork('calls'), TENANTS, String(this.options.seed));
    // The whole schedule is planned and then filtered, so a chosen kind comes at the same moments as in the full run.
    const kinds = this.options.faultKinds;
    const schedule = planFaults(this.random.fork('faults'), {
      startMs: WARM_UP_MS,
      endMs: runMs,
      timings: TIMINGS,
      slots: SLOTS,
    }).filter((f) => kinds === undefined || kinds.includes(f.kind));
    const began = Date.now();
    const faultRuns = this.scheduleFaults(schedule, began);
    await this.placeCalls(planner, began + runMs);
    await Promise.all(faultRuns);
    await this.stopFaults();
    this.progress(
      `faults stopped after ${Math.round((Date.now() - began) / 1000)} s: ${JSON.stringify(this.faults)}; settling`,
    );

    const settleStart = Date.now();
    const settled = await this.settle();
    const settledAfterMs = Date.now() - settleStart;
    this.progress(
      `settled in ${Math.round(settledAfterMs / 1000)} s${settled ? '' : ' (bound reached)'}; checking`,
    );

    const gathered = await this.gather();
    const report: ChaosReport = {
      seed: this.options.seed,
      minutes: this.options.minutes,
      faults: this.faults,
      skippedFaults: this.skipped,
      proxiedRequests: { ...this.proxy.applied },
      calls: this.calls,
      intents: new Set(
        gathered.journal.flatMap((e) => (e.type === 'tool_answered' ? [e.intentId] : [])),
      ).size,
      operations: {
        total: gathered.ledger.length,
        byState: countBy(gathered.ledger.map((v) => v.operation.state)),
      },
      effects: gathered.effects.length,
      settledAfterMs,
      settleTimedOut: !settled,
      unexpectedExits: this.pool.unexpectedExits,
      result: check({
        ...gathered,
        intents: planner.intents,
        limits: this.limits(),
        ledgerOutages: this.ledgerOutages,
        gatewayKills: this.gatewayKills,
        gatewayClockOffsets: Object.fromEntries(
          (this.pool?.processes() ?? []).map((proc) => [proc.name, proc.clockOffsetMs]),
        ),
      }),
      ...(this.options.keep === true && { runDir: this.dir }),
    };
    return report;
  }

  /** On SIGINT: every process killed by PID at once; cleanup() removes the rest. */
  abort(): void {
    clearInterval(this.supervisor);
    this.pool?.killAllNow();
    this.redis?.killNow();
    if (this.options.keep !== true) rmSync(this.dir, { recursive: true, force: true });
  }

  async cleanup(): Promise<void> {
    clearInterval(this.supervisor);
    await this.pool?.stopAll();
    await this.proxy?.close();
    await this.webhook.stop();
    await this.sandbox?.close();
    await this.redis?.stop();
    if (this.options.keep !== true) rmSync(this.dir, { recursive: true, force: true });
  }

  private writeConfig(): string {
    const actions = (confirmAbove?: number) => {
      const common = {
        kind: 'mutation',
        policy: 'queue',
        maxConcurrent: 2,
        maxQueued: 500,
        admissionDeadlineMs: 20_000,
        deadlineMs: TIMINGS.deadlineMs,
      };
      return {
        book_table: {
          ...common,
          provider: 'bookings',
          operation: 'book',
          intent: ['restaurant', 'date', 'time', 'party_size'],
        },
        cancel_booking: {
          ...common,
          provider: 'bookings',
          operation: 'cancel_booking',
          intent: ['booking_id'],
        },
        refund: {
          ...common,
          provider: 'payments',
          operation: 'refund',
          money: true,
          intent: ['order_id', 'amount_cents'],
          ...(confirmAbove !== undefined && { confirmAbove }),
        },
      };
    };
    const provider = (service: string) => ({
      type: 'sandbox',
      service,
      baseUrl: this.proxy?.url,
      timeoutMs: TIMINGS.providerTimeoutMs,
    });
    const document = {
      // The sending mark of a refund reaches the replica before the refund leaves (a failover cannot roll it back).
      redis: { prefix: PREFIX, durability: { mode: 'replica', replicas: 1, timeoutMs: 500 } },
      sandbox: { enabled: false, url: this.sandbox?.url },
      http: { port: 0 },
      sip: { udpPort: 0, tcpPort: 0 },
      log: { level: 'info' },
      model: { provider: 'simulator' },
      gateway: {
        heartbeatMs: TIMINGS.heartbeatMs,
        deadAfterMs: TIMINGS.deadAfterMs,
        drainMs: 8_000,
      },
      worker: {
        concurrency: 8,
        lockDurationMs: TIMINGS.lockDurationMs,
        stalledIntervalMs: 1_000,
        leaseTtlMs: 5_000,
        reconcileGraceMs: TIMINGS.reconcileGraceMs,
        reconcileBackoffMs: 250,
        reconcileMaxBackoffMs: 2_000,
        sweepIntervalMs: 1_000,
        staleAfterMs: 4_000,
      },
      providers: { bookings: provider('bookings'), payments: provider('payments') },
      tenants: TENANTS.map((tenant, i) => ({
        id: tenant.tenantId,
        numbers: [String(7100 + i)],
        agent: 'concierge',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        // The first tenant has a webhook and SMS (a webhook outage must not hold SMS back), the second SMS only.
        notify:
          i === 0
            ? { webhookUrl: this.webhook.url, webhookSecretEnv: WEBHOOK_SECRET_ENV, sms: 'sandbox' }
            : { sms: 'sandbox' },
        actions: actions(tenant.confirmAbove),
      })),
    };
    const path = join(this.dir, 'callgate.yaml');
    writeFileSync(path, stringify(document));
    return path;
  }

  private limits(): ActionLimit[] {
    return TENANTS.flatMap((t) =>
      ['refund', 'book', 'cancel_booking'].map((providerOperation) => ({
        tenantId: t.tenantId,
        providerOperation,
        maxConcurrent: 2,
        leaseBoundMs: TIMINGS.providerTimeoutMs + TIMINGS.reconcileGraceMs,
      })),
    );
  }

  /** Places calls at a seeded, jittered pace on a live gateway until `until`. */
  private async placeCalls(planner: CallPlanner, until: number): Promise<void> {
    const r = this.random.fork('pace');
    const meanGapMs = 60_000 / (this.options.callsPerMinute ?? 90);
    await sleep(WARM_UP_MS);
    while (Date.now() < until) {
      const plan = planner.next();
      const live = this.slots.gateway.filter(
        (p): p is ChaosProcess => p !== undefined && p.ready && !p.paused && isRunning(p),
      );
      const gateway = live.length === 0 ? undefined : r.pick(live);
      if (gateway?.child.connected === true) {
        gateway.child.send({ type: 'call', plan });
        this.calls++;
      } else {
        // Nobody to take the call: its intents were never asked for (no journal entries), and the checker skips them.
        planner.intents.splice(planner.intents.length - plan.intents.length, plan.intents.length);
      }
      await sleep(r.int(Math.round(meanGapMs * 0.5), Math.round(meanGapMs * 1.5)));
    }
  }

  private scheduleFaults(schedule: readonly ScheduledFault[], began: number): Promise<void>[] {
    return schedule.map(async (fault) => {
      await sleep(Math.max(0, began + fault.atMs - Date.now()));
      try {
        if (await this.inject(fault)) this.faults[fault.kind] = (this.faults[fault.kind] ?? 0) + 1;
        else this.skipped[fault.kind] = (this.skipped[fault.kind] ?? 0) + 1;
      } catch (error) {
        this.progress(
          `fault ${fault.kind} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
        this.skipped[fault.kind] = (this.skipped[fault.kind] ?? 0) + 1;
      }
    });
  }

  /** Runs a Redis fault and notes the window clients could not reach Redis. */
  private async redisAway(fault: () => Promise<void> | undefined): Promise<void> {
    const start = Date.now();
    try {
      await fault();
    } finally {
      this.ledgerOutages.push({ start, end: Date.now() + REDIS_RECONNECT_MS });
    }
  }

  /** Makes one fault and, for faults with a duration, ends it again. False when it could not be made. */
  private async inject(fault: ScheduledFault): Promise<boolean> {
    const pool = this.pool as ProcessPool;
    switch (fault.kind) {
      case 'worker_sigkill':
      case 'gateway_sigkill': {
        const role: ProcessRole = fault.kind === 'worker_sigkill' ? 'worker' : 'gateway';
        const proc = this.slots[role][fault.slot];
        if (!proc || !isRunning(proc) || this.replacing.has(`${role}${fault.slot}`)) return false;
        this.replacing.add(`${role}${fault.slot}`);
        if (role === 'gateway') this.gatewayKills.push({ gatewayId: proc.name, at: Date.now() });
        await pool.kill(proc);
        this.slots[role][fault.slot] = pool.start(role, fault.slot);
        this.replacing.delete(`${role}${fault.slot}`);
        return true;
      }
      case 'worker_sigstop':
      case 'gateway_sigstop': {
        const proc = this.slots[fault.kind === 'worker_sigstop' ? 'worker' : 'gateway'][fault.slot];
        if (!proc || !isRunning(proc) || proc.paused) return false;
        pool.pause(proc);
        await sleep(fault.durationMs);
        pool.resume(proc);
        return true;
      }
      case 'clock_offset': {
        if (!existsSync(LIBFAKETIME)) return false;
        const role: ProcessRole = fault.worker ? 'worker' : 'gateway';
        const key = `${role}${fault.slot}`;
        if (this.replacing.has(key)) return false;
        this.replacing.add(key);
        try {
          // The skewed process starts before the old one stops, so the slot is never empty.
          const skewed = pool.start(role, fault.slot, fault.offsetMs);
          if (!(await pool.waitReady(skewed))) {
            await pool.kill(skewed);
            return false;
          }
          const old = this.slots[role][fault.slot];
          this.slots[role][fault.slot] = skewed;
          if (old) await pool.stop(old);
          return true;
        } finally {
          this.replacing.delete(key);
        }
      }
      case 'redis_failover':
        await this.redisAway(() => this.redis?.failover());
        return true;
      case 'redis_restart':
        await this.redisAway(() => this.redis?.restartPrimary(fault.durationMs));
        return true;
      case 'webhook_outage':
        await this.webhook.stop();
        await sleep(fault.durationMs);
        await this.webhook.start();
        return true;
      case 'provider_slow':
        return this.sandboxWindow(`latency=${fault.delayMs}`, fault.durationMs);
      case 'commit_then_timeout':
        return this.sandboxWindow(
          `commit-then-timeout=${TIMINGS.providerTimeoutMs * 3}`,
          fault.durationMs,
        );
      case 'provider_5xx':
        return this.proxyWindow({ kind: 'reject', status: 503 }, fault.durationMs);
      case 'answer_dropped':
        return this.proxyWindow({ kind: 'drop_answer' }, fault.durationMs);
      case 'commit_then_5xx':
        return this.proxyWindow({ kind: 'error_after_forward', status: 502 }, fault.durationMs);
      case 'request_held':
        return this.proxyWindow({ kind: 'hold', holdMs: fault.delayMs }, fault.durationMs);
    }
  }

  private async sandboxWindow(spec: string, durationMs: number): Promise<boolean> {
    const url = this.sandbox?.url ?? '';
    for (const [service, operation] of [
      ['payments', 'refund'],
      ['bookings', 'book'],
    ]) {
      const response = await fetch(`${url}/admin/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ fault: spec, service, operation }),
      });
      if (response.status !== 201)
        throw new Error(`the sandbox refused ${spec}: ${await response.text()}`);
    }
    await sleep(durationMs);
    await fetch(`${url}/admin/faults`, { method: 'DELETE' });
    return true;
  }

  private async proxyWindow(
    mode: Parameters<FaultProxy['setMode']>[0],
    durationMs: number,
  ): Promise<boolean> {
    this.proxy?.setMode(mode);
    await sleep(durationMs);
    this.proxy?.setMode({ kind: 'pass' });
    return true;
  }

  /** Replaces a process that exited without a fault telling it to (a finding, kept for the report). */
  private supervise(): void {
    const pool = this.pool;
    if (!pool) return;
    for (const role of ['worker', 'gateway'] as const) {
      this.slots[role].forEach((proc, slot) => {
        if (!proc || isRunning(proc) || this.replacing.has(`${role}${slot}`)) return;
        pool.unexpectedExits.push(
          `${proc.name} exited with ${String(proc.child.exitCode ?? proc.child.signalCode)} (log: ${proc.logPath})`,
        );
        this.slots[role][slot] = pool.start(role, slot);
      });
    }
  }

  /** Every fault ended: no sandbox rules, the proxy passing, the webhook up, nothing paused, every slot ready. */
  private async stopFaults(): Promise<void> {
    await fetch(`${this.sandbox?.url ?? ''}/admin/faults`, { method: 'DELETE' });
    this.proxy?.setMode({ kind: 'pass' });
    if (!this.webhook.up) await this.webhook.start();
    for (const proc of this.pool?.processes() ?? []) this.pool?.resume(proc);
    this.supervise();
    for (const proc of [...this.slots.worker, ...this.slots.gateway])
      if (proc) await this.pool?.waitReady(proc);
  }

  /**
   * Waits for the calls to end and the system to come to rest: no operation open but an UNKNOWN,
   * no out-of-band message waiting or retrying. Bounded; false when the bound was reached.
   */
  private async settle(): Promise<boolean> {
    const deadline = Date.now() + LONGEST_CALL_MS + SETTLE_LIMIT_MS;
    await sleep(LONGEST_CALL_MS);
    const redis = new Redis(this.redis?.url ?? '', { maxRetriesPerRequest: 3 });
    redis.on('error', () => undefined);
    const notify = new Queue(NOTIFY_QUEUE, { connection: redis, prefix: bullPrefix(PREFIX) });
    const ledger = new OperationLedger(redis, {
      prefix: PREFIX,
      retentionDays: 30,
      moneyRetentionDays: 400,
    });
    try {
      while (Date.now() < deadline) {
        try {
          const open = (await Promise.all(TENANTS.map((t) => ledger.listOpen(t.tenantId))))
            .flat()
            .filter((op) => op.state !== 'UNKNOWN');
          const counts = await notify.getJobCounts(
            'waiting',
            'active',
            'delayed',
            'prioritized',
            'waiting-children',
          );
          const queued = Object.values(counts).reduce((sum, n) => sum + n, 0);
          if (open.length === 0 && queued === 0) return true;
        } catch {
          // Redis still recovering: look again
        }
        await sleep(SETTLE_POLL_MS);
      }
      return false;
    } finally {
      await notify.close();
      redis.disconnect();
    }
  }

  private async gather(): Promise<{
    journal: ReturnType<typeof readJournals>;
    effects: SandboxEffect[];
    concurrency: ConcurrencyReport;
    ledger: LedgerView[];
    sms: SinkMessage[];
    webhooks: WebhookReceiver['received'];
  }> {
    const get = async <T>(path: string): Promise<T> =>
      (await (await fetch(`${this.sandbox?.url ?? ''}${path}`)).json()) as T;
    const { effects } = await get<{ effects: SandboxEffect[] }>('/admin/effects');
    const concurrency = await get<ConcurrencyReport>('/admin/concurrency');
    const { messages } = await get<{ messages: SinkMessage[] }>('/admin/messages?channel=sms');
    const redis = new Redis(this.redis?.url ?? '', { maxRetriesPerRequest: 3 });
    redis.on('error', () => undefined);
    const notify = new Queue(NOTIFY_QUEUE, { connection: redis, prefix: bullPrefix(PREFIX) });
    try {
      const ledger = new OperationLedger(redis, {
        prefix: PREFIX,
        retentionDays: 30,
        moneyRetentionDays: 400,
      });
      const keys = new LedgerKeys(PREFIX);
      const gaveUp = new Set(
        (await notify.getFailed(0, -1)).map(
          (job) => (job.data as { operationId?: string }).operationId ?? '',
        ),
      );
      const views: LedgerView[] = [];
      for (const tenant of TENANTS) {
        const ids = await scanOperationIds(redis, keys.operation(tenant.tenantId, ''));
        const unknown = new Set(
          (await ledger.listUnknown(tenant.tenantId, 100_000)).map((u) => u.operation.operationId),
        );
        for (const id of ids) {
          const operation = await ledger.get(tenant.tenantId, id);
          if (!operation) continue;
          const stuck = (await ledger.rawField(operation, 'reconcile_stuck')) === '1';
          const history = await ledger.history(tenant.tenantId, id);
          views.push({
            attemptSentAt: attemptSendTimes(operation, history),
            operation,
            reconcileStuck: stuck,
            countedUnknown: unknown.has(id),
            outOfBandGaveUp:
              gaveUp.has(id) || JSON.stringify(operation.delivery ?? {}).includes('gave_up'),
          });
        }
      }
      return {
        journal: readJournals(this.dir),
        effects,
        concurrency,
        ledger: views,
        sms: messages,
        webhooks: this.webhook.received,
      };
    } finally {
      await notify.close();
      redis.disconnect();
    }
  }
}

/** Each attempt's token and when it was marked sending (its RUNNING entry in the history). */
function attemptSendTimes(
  operation: Operation,
  history: readonly HistoryEntry[],
): Record<string, number> {
  const sentAt: Record<string, number> = {};
  for (const entry of history) {
    const token = operation.attemptTokens[entry.attempt - 1];
    if (entry.state === 'RUNNING' && token !== undefined && sentAt[token] === undefined)
      sentAt[token] = entry.at;
  }
  return sentAt;
}

/** Operation ids under `<prefix>:{t:<tenant>}:op:` (the hashes, not their history lists). */
async function scanOperationIds(redis: Redis, opKeyPrefix: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${opKeyPrefix}*`, 'COUNT', 1_000);
    cursor = next;
    for (const key of keys) {
      const id = key.slice(opKeyPrefix.length);
      if (!id.includes(':')) ids.push(id);
    }
  } while (cursor !== '0');
  return ids;
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const value of values) out[value] = (out[value] ?? 0) + 1;
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The report as the lines `npm run chaos` prints. */
export function formatReport(report: ChaosReport): string {
  const lines = [
    `chaos run: seed ${report.seed}, ${report.minutes} min, ${report.calls} calls, ${report.intents} intents, ${report.operations.total} operations ${JSON.stringify(report.operations.byState)}, ${report.effects} effects`,
    `faults injected: ${
      Object.entries(report.faults)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    } (total ${Object.values(report.faults).reduce((a, b) => a + b, 0)})`,
  ];
  if (Object.keys(report.skippedFaults).length > 0)
    lines.push(`faults skipped: ${JSON.stringify(report.skippedFaults)}`);
  lines.push(
    `provider requests the fault proxy acted on: ${
      Object.entries(report.proxiedRequests)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }`,
  );
  lines.push(
    `settled in ${Math.round(report.settledAfterMs / 1000)} s${report.settleTimedOut ? ' (bound reached: operations still open or messages still queued)' : ''}`,
  );
  if (report.unexpectedExits.length > 0)
    lines.push(
      `processes that exited on their own: ${report.unexpectedExits.length}`,
      ...report.unexpectedExits.slice(0, 5).map((e) => `  ${e}`),
    );
  lines.push('violations:');
  for (const name of INVARIANTS as readonly Invariant[]) {
    const causes = Object.entries(report.result.causes).filter(([cause]) =>
      cause.startsWith(`${name}/`),
    );
    const byCause = causes.map(([cause, n]) => `${cause.slice(name.length + 1)} ${n}`).join(', ');
    lines.push(
      `  ${name.padEnd(26)} ${report.result.violations[name]}${byCause === '' ? '' : ` (${byCause})`}`,
    );
    for (const example of report.result.examples[name]) lines.push(`      e.g. ${example}`);
  }
  const toldTwice = report.result.toldTwiceLedgerUnreachable;
  lines.push(
    `not violations: heard, then sent again because the gateway died with Redis away: ${toldTwice.count}`,
    ...toldTwice.examples.map((example) => `      e.g. ${example}`),
  );
  const heldPast = report.result.heldPastLeaseBound;
  lines.push(
    `not violations: above a limit only by a request held on its way past its lease bound: ${heldPast.count}`,
    ...heldPast.examples.map((example) => `      e.g. ${example}`),
  );
  if (report.runDir !== undefined) lines.push(`run directory kept: ${report.runDir}`);
  return lines.join('\n');
}

export function totalViolations(report: ChaosReport): number {
  return Object.values(report.result.violations).reduce((a, b) => a + b, 0);
}
