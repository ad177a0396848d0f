/**
 * The operation ledger: the only module that calls the ledger's Lua scripts. Every state change is
 * a compare-and-set fenced by attempt; reads give typed Operations.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { counter } from '../../config/metrics.ts';
import { LedgerKeys } from './keys.ts';
import { loadLedgerScripts, type LedgerCommands } from './ledger-scripts.ts';
import {
  IdempotencyConflictError,
  OperationNotFoundError,
  scriptError,
  StaleAttemptError,
} from './ledger-errors.ts';
import {
  isTerminal,
  type Actor,
  type ActionKind,
  type DeliveryRecord,
  type HistoryEntry,
  type Operation,
  type OperationError,
  type OperationState,
  type OutOfBandChannel,
  type OutOfBandRecord,
  OUT_OF_BAND_CHANNELS,
} from './operation.ts';

const DAY_SECONDS = 86_400;
/** How often `fsync` durability asks the server again how it persists writes (an operator may change it). */
const FSYNC_CHECK_MS = 60_000;
/** How long outbox clears are gathered before one ZREM sends them. */
const OUTBOX_CLEAR_BATCH_MS = 5;

const staleRefused = counter({
  name: 'callgate_operation_stale_completions_total',
  help: 'Transitions refused because the worker held a superseded attempt.',
  labelNames: ['action'],
});

/** config redis.durability: how an attempt's sending mark is made durable before its request leaves. */
export interface SendingDurability {
  readonly mode: 'none' | 'replica' | 'fsync';
  readonly replicas: number;
  readonly timeoutMs: number;
}

export interface OperationLedgerOptions {
  /** Key prefix (config redis.prefix). */
  prefix: string;
  retentionDays: number;
  moneyRetentionDays: number;
  /** Clock, for tests. */
  now?: () => number;
}

/** What admission knows of a new operation: its identity and scope, and how to admit it. */
export type NewOperation = Pick<
  Operation,
  | 'operationId'
  | 'tenantId'
  | 'action'
  | 'kind'
  | 'provider'
  | 'providerOperation'
  | 'idempotencyKey'
  | 'paramsHash'
  | 'params'
  | 'scope'
  | 'providerIdempotent'
  | 'money'
  | 'admissionDeadlineAt'
  | 'deadlineAt'
  | 'compensates'
  | 'coalesceKey'
> & {
  /** How duplicates are recognised: by idempotency key (mutations), by coalesce key (shared reads), or not at all. */
  readonly mode: 'mutation' | 'read' | 'coalesce';
  /**
   * Most active (admitted, running, waiting to retry) operations of this action for the tenant; -1
   * for no bound. An UNKNOWN operation does not count: nothing runs for it while it waits for
   * reconciliation (it is counted among the tenant's UNKNOWN operations instead).
   */
  readonly capacity: number;
  /** Window of the action's retry budget, in ms (requests are counted at admission). */
  readonly budgetWindowMs: number;
};

export type AdmitOutcome =
  | { readonly type: 'admitted'; readonly operationId: string; readonly activeBefore: number }
  | { readonly type: 'duplicate'; readonly operationId: string; readonly state: OperationState }
  | { readonly type: 'coalesced'; readonly operationId: string; readonly state: OperationState }
  | { readonly type: 'full'; readonly active: number };

/** What a transition does besides moving the state. */
export interface TransitionChange {
  /** States the caller believes the operation is in; anything else is refused as illegal. */
  readonly from: readonly OperationState[];
  readonly to: OperationState;
  /** The attempt the caller holds; omitted only where no worker attempt is involved. */
  readonly attempt?: number;
  /**
   * The fence token of the attempt the caller holds (`Operation.attemptToken`): refused as stale
   * when the operation's current token differs, even at the same attempt number (a rollback).
   */
  readonly token?: string;
  readonly actor: Actor;
  readonly reason: string;
  readonly fields?: Readonly<Record<string, string>>;
  /** Begin a new attempt (the attempt number is incremented and returned). */
  readonly newAttempt?: boolean;
  /**
   * The attempt's concurrency lease (`<id>:<attempt>`, taken by `start`), in the same step: give it
   * back with a move that settles the attempt's outcome; keep it ("park") for `forMs` after the
   * request was sent when the outcome is not settled (the request may still be at the provider); or
   * give back every attempt's ("settle") when reconciliation has settled them all.
   */
  readonly lease?:
    | { readonly mode: 'release' }
    | { readonly mode: 'park'; readonly forMs: number }
    | { readonly mode: 'settle' };
}

export interface TransitionOutcome {
  readonly attempt: number;
  /** Set when the transition appended a result event. */
  readonly eventId?: string;
}

/** What `start` did: began the attempt, or left the operation as it is (with what it read). */
export type StartOutcome =
  | { readonly type: 'started'; readonly operation: Operation }
  | { readonly type: 'as_is'; readonly operation: Operation }
  | { readonly type: 'no_lease' }
  | { readonly type: 'not_found' };

/** What recording an owed compensation found (compensation-owe-2.lua). */
export type OweCompensationOutcome =
  | {
      readonly type: 'owed';
      readonly tries: number;
      readonly newly: boolean;
      readonly request: string;
    }
  | { readonly type: 'linked'; readonly compensationId: string }
  | { readonly type: 'not_committed'; readonly state: OperationState };

/** What linking an admitted compensation found (compensation-link-4.lua). */
export type LinkCompensationOutcome =
  | { readonly type: 'linked' }
  | { readonly type: 'other'; readonly compensationId: string }
  | { readonly type: 'stale_try' }
  | { readonly type: 'try_ended'; readonly state: OperationState; readonly tries: number }
  | { readonly type: 'not_committed'; readonly state: OperationState };

/** What settling a compensation in flight found (compensation-settle-4.lua). */
export type SettleCompensationOutcome =
  | { readonly type: 'open' }
  | { readonly type: 'committed'; readonly compensationId: string; readonly action: string }
  | { readonly type: 'reowed'; readonly compensationId: string; readonly action: string }
  | {
      readonly type: 'released';
      readonly compensationId: string;
      readonly action: string;
      readonly state: OperationState;
      readonly tries: number;
    }
  | { readonly type: 'moved' | 'gone' };

/** An owed compensation as stored on its original. */
export interface OwedCompensation {
  /** The compensation request (JSON), absent when nothing is owed. */
  readonly request?: string;
  /** Compensations of the original that ended without effect so far (each try has its own key). */
  readonly tries: number;
  /** The compensation linked now, if any (then nothing is owed, whatever the index says). */
  readonly compensatedBy?: string;
}

export interface RetryBudgetDecision {
  readonly allowed: boolean;
  readonly requests: number;
  readonly retries: number;
}

/** Whether writes were made durable on the configured topology, and why not. */
export type DurableOutcome =
  { readonly ok: true } | { readonly ok: false; readonly reason: string };

export class OperationLedger {
  readonly keys: LedgerKeys;
  private readonly redis: Redis & LedgerCommands;
  private readonly now: () => number;
  private readonly pendingOutboxClears = new Map<string, string[]>();
  private fsyncChecked: { readonly at: number; readonly problem: string | undefined } | undefined;
  private outboxFlushTimer: NodeJS.Timeout | undefined;
  /** The connection of durability probes (admission's group commit), made on first need. */
  private probeConnection: Promise<Redis> | undefined;
  /** The probe in flight, and the one that waits for it (see `writesDurable`). */
  private probing: Promise<DurableOutcome> | undefined;
  private probingNext: Promise<DurableOutcome> | undefined;

  constructor(
    redis: Redis,
    private readonly options: OperationLedgerOptions,
  ) {
    this.redis = loadLedgerScripts(redis);
    this.keys = new LedgerKeys(options.prefix);
    this.now = options.now ?? Date.now;
  }

  async admit(op: NewOperation): Promise<AdmitOutcome> {
    const k = this.keys;
    const now = this.now();
    // The pointer is written first and never changes; a crash after it leaves a harmless orphan.
    // Both commands go out together: one round trip, in order on the connection. It lives outside
    // the tenant's slot, so the script cannot write it; every answer but ADMITTED takes it back.
    const pointer = this.redis.set(
      k.tenantOf(op.operationId),
      op.tenantId,
      'EX',
      this.retentionSeconds(op.money) + DAY_SECONDS,
    );
    const admitted = this.redis.ledgerAdmit(
      k.operation(op.tenantId, op.operationId),
      k.history(op.tenantId, op.operationId),
      k.idempotency(op.tenantId, op.idempotencyKey),
      k.open(op.tenantId),
      k.active(op.tenantId, op.action),
      k.session(op.tenantId, op.scope.sessionId),
      k.outbox(op.tenantId),
      k.coalesce(op.tenantId, op.coalesceKey ?? op.idempotencyKey),
      k.budgetRequests(op.tenantId, op.action),
      op.operationId,
      op.paramsHash,
      now,
      op.capacity,
      JSON.stringify(toFields(op)),
      op.mode,
      this.retentionSeconds(op.money),
      op.budgetWindowMs,
    );
    const [, reply] = await Promise.all([pointer, admitted]);
    const [status, a, b] = reply as [string, string, string | undefined];
    switch (status) {
      case 'ADMITTED':
        return { type: 'admitted', operationId: a, activeBefore: Number(b ?? 0) };
      case 'DUPLICATE':
        if (a !== op.operationId) await this.redis.del(k.tenantOf(op.operationId));
        return { type: 'duplicate', operationId: a, state: b as OperationState };
      case 'COALESCED':
        if (a !== op.operationId) await this.redis.del(k.tenantOf(op.operationId));
        return { type: 'coalesced', operationId: a, state: b as OperationState };
      case 'CONFLICT':
        await this.redis.del(k.tenantOf(op.operationId));
        throw new IdempotencyConflictError(op.idempotencyKey, a);
      case 'FULL':
        await this.redis.del(k.tenantOf(op.operationId));
        return { type: 'full', active: Number(a) };
      default:
        throw new Error(`unexpected admit reply ${String(status)}`);
    }
  }

  /**
   * Moves `op` by compare-and-set. Terminal and UNKNOWN states append the result event to the
   * owning gateway's stream in the same script.
   */
  async transition(op: Operation, change: TransitionChange): Promise<TransitionOutcome> {
    const k = this.keys;
    const lease = change.lease;
    const emits = isTerminal(change.to) || change.to === 'UNKNOWN';
    const eventId = emits ? `ev_${randomUUID()}` : '';
    const reply = (await this.redis.ledgerTransition(
      k.operation(op.tenantId, op.operationId),
      k.history(op.tenantId, op.operationId),
      k.open(op.tenantId),
      k.unknown(op.tenantId),
      k.active(op.tenantId, op.action),
      k.results(op.tenantId, op.scope.ownerGateway),
      k.idempotency(op.tenantId, op.idempotencyKey),
      k.coalesce(op.tenantId, coalesceKeyOf(op)),
      k.outbox(op.tenantId),
      k.lease(op.tenantId, op.action),
      change.from.join(','),
      change.attempt === undefined ? '' : String(change.attempt),
      change.to,
      change.token ?? '',
      change.actor,
      change.reason,
      JSON.stringify(change.fields ?? {}),
      change.newAttempt ? '1' : '0',
      emits ? '1' : '0',
      this.retentionSeconds(op.money),
      eventId,
      lease?.mode ?? '',
      lease?.mode === 'park' ? lease.forMs : 0,
      k.results(op.tenantId, ''),
    )) as (string | null)[];
    const error = scriptError(reply, {
      operationId: op.operationId,
      to: change.to,
      attempt: change.attempt,
    });
    if (error) {
      if (error instanceof StaleAttemptError) staleRefused.labels(op.action).inc();
      throw error;
    }
    return { attempt: Number(reply[1]), eventId: reply[2] ? reply[2] : undefined };
  }

  /**
   * Reads an operation and, in the same step, begins its next attempt if it is due: ADMITTED or
   * FAILED_RETRYABLE within its deadlines (on the Redis clock) and, for a retry, below
   * `attempt.maxAttempts`, of `job.action` and bound to `provider`, with one of the action's leases
   * free (taken with the move). The move is the one `transition` would make to RUNNING with a new
   * attempt, marked sending, with a new fence token; anything else is left as it is and returned.
   */
  async start(
    job: { readonly tenantId: string; readonly operationId: string; readonly action: string },
    provider: string,
    attempt: {
      readonly ttlMs: number;
      readonly max: number;
      readonly maxAttempts: number;
      readonly token?: string;
    },
  ): Promise<StartOutcome> {
    const k = this.keys;
    const reply = (await this.redis.ledgerStart(
      k.operation(job.tenantId, job.operationId),
      k.history(job.tenantId, job.operationId),
      k.open(job.tenantId),
      k.unknown(job.tenantId),
      k.lease(job.tenantId, job.action),
      attempt.token ?? `at_${randomUUID()}`,
      job.action,
      provider,
      attempt.ttlMs,
      attempt.max,
      attempt.maxAttempts,
    )) as string[];
    switch (reply[0]) {
      case 'STARTED':
        return { type: 'started', operation: fromHash(pairsToRecord(reply)) };
      case 'AS_IS':
        return { type: 'as_is', operation: fromHash(pairsToRecord(reply)) };
      case 'NO_LEASE':
        return { type: 'no_lease' };
      case 'ERR_NOT_FOUND':
        return { type: 'not_found' };
      default:
        throw new Error(`unexpected start reply ${String(reply[0])}`);
    }
  }

  /** Sets fields while the operation stays in one of `states` at `attempt` (e.g. marking it sending). */
  async setFenced(
    op: Pick<Operation, 'tenantId' | 'operationId' | 'action'>,
    states: readonly OperationState[],
    attempt: number | undefined,
    fields: Readonly<Record<string, string>>,
    onlyIfUnset = false,
  ): Promise<{ ok: true } | { ok: false; field: string; value: string }> {
    const reply = (await this.redis.ledgerSetFenced(
      this.keys.operation(op.tenantId, op.operationId),
      states.join(','),
      attempt === undefined ? '' : String(attempt),
      JSON.stringify(fields),
      onlyIfUnset ? '1' : '0',
    )) as (string | null)[];
    if (reply[0] === 'ERR_EXISTS')
      return { ok: false, field: String(reply[1]), value: String(reply[2]) };
    const error = scriptError(reply, { operationId: op.operationId, attempt });
    if (error) {
      if (error instanceof StaleAttemptError) staleRefused.labels(op.action).inc();
      throw error;
    }
    return { ok: true };
  }

  /**
   * Records that `original` is owed a compensation (the request, as JSON), before it is admitted;
   * the first request owed is kept. See compensation-owe-2.lua.
   */
  async oweCompensation(
    original: Pick<Operation, 'tenantId' | 'operationId'>,
    request: string,
  ): Promise<OweCompensationOutcome> {
    const k = this.keys;
    const reply = (await this.redis.ledgerCompensationOwe(
      k.operation(original.tenantId, original.operationId),
      k.compensationsOwed(original.tenantId),
      request,
    )) as string[];
    switch (reply[0]) {
      case 'OWED':
        return {
          type: 'owed',
          tries: Number(reply[1] ?? 0),
          newly: reply[2] === '1',
          request: reply[3] ?? request,
        };
      case 'LINKED':
        return { type: 'linked', compensationId: reply[1] ?? '' };
      case 'ERR_ILLEGAL':
        return { type: 'not_committed', state: reply[1] as OperationState };
      default:
        throw new OperationNotFoundError(original.operationId);
    }
  }

  /** Links an admitted compensation to `original`; the undo is no longer owed but in flight. See compensation-link-4.lua. */
  async linkCompensation(
    original: Pick<Operation, 'tenantId' | 'operationId'>,
    compensationId: string,
  ): Promise<LinkCompensationOutcome> {
    const k = this.keys;
    const reply = (await this.redis.ledgerCompensationLink(
      k.operation(original.tenantId, original.operationId),
      k.operation(original.tenantId, compensationId),
      k.compensationsOwed(original.tenantId),
      k.compensationsInFlight(original.tenantId),
      compensationId,
    )) as string[];
    switch (reply[0]) {
      case 'LINKED':
        return { type: 'linked' };
      case 'OTHER':
        return { type: 'other', compensationId: reply[1] ?? '' };
      case 'STALE_TRY':
        return { type: 'stale_try' };
      case 'TRY_ENDED':
        return {
          type: 'try_ended',
          state: reply[1] as OperationState,
          tries: Number(reply[2] ?? 0),
        };
      case 'ERR_ILLEGAL':
        return { type: 'not_committed', state: reply[1] as OperationState };
      default:
        throw new OperationNotFoundError(
          reply[0] === 'ERR_NOT_FOUND' ? compensationId : original.operationId,
        );
    }
  }

  /**
   * Looks at the compensation linked to `originalId`: done, still running, or ended without effect
   * (then its link is released, once). See compensation-settle-4.lua.
   */
  async settleCompensation(
    tenantId: string,
    originalId: string,
  ): Promise<SettleCompensationOutcome> {
    const k = this.keys;
    const linked = await this.redis.hget(k.operation(tenantId, originalId), 'compensated_by');
    const compensationId = linked ?? '';
    const reply = (await this.redis.ledgerCompensationSettle(
      k.operation(tenantId, originalId),
      k.operation(tenantId, linked ?? originalId),
      k.compensationsInFlight(tenantId),
      k.compensationsOwed(tenantId),
      compensationId,
      originalId,
    )) as string[];
    switch (reply[0]) {
      case 'COMMITTED':
        return { type: 'committed', compensationId, action: reply[1] ?? '' };
      case 'REOWED':
        return { type: 'reowed', compensationId, action: reply[1] ?? '' };
      case 'RELEASED':
        return {
          type: 'released',
          compensationId,
          action: reply[1] ?? '',
          state: reply[2] as OperationState,
          tries: Number(reply[3] ?? 0),
        };
      case 'OPEN':
        return { type: 'open' };
      case 'MOVED':
        return { type: 'moved' };
      default:
        return { type: 'gone' };
    }
  }

  /** The owed compensation of `originalId` and how many tries of it failed. */
  async owedCompensation(tenantId: string, originalId: string): Promise<OwedCompensation> {
    const [request, tries, compensatedBy] = await this.redis.hmget(
      this.keys.operation(tenantId, originalId),
      'compensation_owed',
      'compensation_tries',
      'compensated_by',
    );
    return {
      request: request ?? undefined,
      tries: Number(tries ?? 0),
      compensatedBy: compensatedBy ?? undefined,
    };
  }

  /** Gives up an owed compensation that can never be admitted (its request is refused as invalid). */
  async dropOwedCompensation(tenantId: string, originalId: string): Promise<void> {
    await this.redis
      .multi()
      .hdel(this.keys.operation(tenantId, originalId), 'compensation_owed')
      .zrem(this.keys.compensationsOwed(tenantId), originalId)
      .exec();
  }

  /** Takes an original off the owed index only (a compensation is linked to it already). */
  async unlistOwedCompensation(tenantId: string, originalId: string): Promise<void> {
    await this.redis.zrem(this.keys.compensationsOwed(tenantId), originalId);
  }

  /** Originals owed a compensation, longest owed first. */
  async listOwedCompensations(tenantId: string, limit = 100): Promise<string[]> {
    return this.redis.zrange(this.keys.compensationsOwed(tenantId), 0, limit - 1);
  }

  /** Originals whose compensation is in flight, oldest first. */
  async listCompensationsInFlight(tenantId: string, limit = 100): Promise<string[]> {
    return this.redis.zrange(this.keys.compensationsInFlight(tenantId), 0, limit - 1);
  }

  /** How many compensations each tenant owes, and since when the oldest is owed (ms, 0 for none). */
  async owedCompensationCounts(
    tenantIds: readonly string[],
  ): Promise<{ owed: number; oldestSince: number }[]> {
    if (tenantIds.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const tenantId of tenantIds) {
      pipeline.zcard(this.keys.compensationsOwed(tenantId));
      pipeline.zrange(this.keys.compensationsOwed(tenantId), 0, 0, 'WITHSCORES');
    }
    const replies = (await pipeline.exec()) ?? [];
    return tenantIds.map((_, i) => {
      const oldest = replies[2 * i + 1]?.[1] as string[] | undefined;
      return { owed: Number(replies[2 * i]?.[1] ?? 0), oldestSince: Number(oldest?.[1] ?? 0) };
    });
  }

  async get(tenantId: string, operationId: string): Promise<Operation | undefined> {
    const hash = await this.redis.hgetall(this.keys.operation(tenantId, operationId));
    return hash.state === undefined ? undefined : fromHash(hash);
  }

  async require(tenantId: string, operationId: string): Promise<Operation> {
    const op = await this.get(tenantId, operationId);
    if (!op) throw new OperationNotFoundError(operationId);
    return op;
  }

  /** One stored field not part of Operation (bookkeeping such as last_outcome_unknown). */
  async rawField(
    op: Pick<Operation, 'tenantId' | 'operationId'>,
    field: string,
  ): Promise<string | undefined> {
    return (
      (await this.redis.hget(this.keys.operation(op.tenantId, op.operationId), field)) ?? undefined
    );
  }

  /** Finds an operation by id alone (admin API). */
  async getById(operationId: string): Promise<Operation | undefined> {
    const tenantId = await this.redis.get(this.keys.tenantOf(operationId));
    return tenantId === null ? undefined : this.get(tenantId, operationId);
  }

  async history(tenantId: string, operationId: string): Promise<HistoryEntry[]> {
    const rows = await this.redis.lrange(this.keys.history(tenantId, operationId), 0, -1);
    return rows.map((row) => JSON.parse(row) as HistoryEntry);
  }

  async findByIdempotencyKey(
    tenantId: string,
    idempotencyKey: string,
  ): Promise<Operation | undefined> {
    const id = await this.redis.get(this.keys.idempotency(tenantId, idempotencyKey));
    return id === null ? undefined : this.get(tenantId, id);
  }

  async listBySession(tenantId: string, sessionId: string): Promise<Operation[]> {
    return this.load(
      tenantId,
      await this.redis.zrange(this.keys.session(tenantId, sessionId), 0, -1),
    );
  }

  /** Operations currently UNKNOWN, oldest first, with the time each became UNKNOWN. */
  async listUnknown(
    tenantId: string,
    limit = 1000,
  ): Promise<{ operation: Operation; since: number }[]> {
    const rows = await this.redis.zrange(this.keys.unknown(tenantId), 0, limit - 1, 'WITHSCORES');
    const ids = rows.filter((_, i) => i % 2 === 0);
    const since = rows.filter((_, i) => i % 2 === 1).map(Number);
    const ops = await this.load(tenantId, ids);
    return ops.map((operation) => ({
      operation,
      since: since[ids.indexOf(operation.operationId)] ?? 0,
    }));
  }

  /** Open (non-terminal) operations whose last transition is older than `before`, oldest first. */
  async listOpen(
    tenantId: string,
    before = Number.POSITIVE_INFINITY,
    limit = 1000,
  ): Promise<Operation[]> {
    const ids = await this.redis.zrangebyscore(
      this.keys.open(tenantId),
      '-inf',
      before === Number.POSITIVE_INFINITY ? '+inf' : before,
      'LIMIT',
      0,
      limit,
    );
    return this.load(tenantId, ids);
  }

  async countUnknown(tenantId: string): Promise<number> {
    return this.redis.zcard(this.keys.unknown(tenantId));
  }

  /** Admitted operations that may have no job yet (admitted before `before`). */
  async outbox(tenantId: string, before: number, limit = 500): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.outbox(tenantId), '-inf', before, 'LIMIT', 0, limit);
  }

  /** The job for the operation exists: it leaves the outbox. */
  async clearOutbox(tenantId: string, operationId: string): Promise<void> {
    await this.redis.zrem(this.keys.outbox(tenantId), operationId);
  }

  /**
   * Like clearOutbox, but gathered: the ids cleared within a few milliseconds leave the outbox in
   * one ZREM per tenant. A clear that is lost (a crash before the flush) only makes the outbox
   * sweep find a job that exists, which is a no-op. `flushOutbox` sends what is pending now.
   */
  clearOutboxSoon(tenantId: string, operationId: string): void {
    let ids = this.pendingOutboxClears.get(tenantId);
    if (!ids) {
      ids = [];
      this.pendingOutboxClears.set(tenantId, ids);
    }
    ids.push(operationId);
    this.outboxFlushTimer ??= setTimeout(
      () => void this.flushOutbox().catch(() => undefined),
      OUTBOX_CLEAR_BATCH_MS,
    );
  }

  async flushOutbox(): Promise<void> {
    if (this.outboxFlushTimer !== undefined) clearTimeout(this.outboxFlushTimer);
    this.outboxFlushTimer = undefined;
    const batches = [...this.pendingOutboxClears];
    this.pendingOutboxClears.clear();
    await Promise.all(
      batches.map(([tenantId, ids]) => this.redis.zrem(this.keys.outbox(tenantId), ...ids)),
    );
  }

  /** How many operations of each action are active (admitted, running or waiting to retry) and how many hold a lease. */
  async capacityUse(
    pairs: readonly { tenantId: string; action: string }[],
  ): Promise<{ active: number; leases: number }[]> {
    if (pairs.length === 0) return [];
    const now = await this.time();
    const pipeline = this.redis.pipeline();
    for (const { tenantId, action } of pairs) {
      pipeline.zcard(this.keys.active(tenantId, action));
      pipeline.zcount(this.keys.lease(tenantId, action), now, '+inf');
    }
    const replies = (await pipeline.exec()) ?? [];
    return pairs.map((_, i) => ({
      active: Number(replies[2 * i]?.[1] ?? 0),
      leases: Number(replies[2 * i + 1]?.[1] ?? 0),
    }));
  }

  async renewLease(
    tenantId: string,
    action: string,
    holder: string,
    ttlMs: number,
  ): Promise<boolean> {
    return (
      (await this.redis.ledgerLeaseRenew(this.keys.lease(tenantId, action), holder, ttlMs)) === 1
    );
  }

  /**
   * Makes the writes this connection made so far (an attempt's "sending" mark) durable on the
   * configured topology before a request leaves: WAIT for replicas, or a server that fsyncs every
   * write (checked once a minute). `ok: false` means the request must not be sent.
   */
  async makeDurable(
    durability: SendingDurability,
  ): Promise<{ readonly ok: true } | { readonly ok: false; readonly reason: string }> {
    switch (durability.mode) {
      case 'none':
        return { ok: true };
      case 'replica':
        return waitForReplicas(this.redis, durability);
      case 'fsync': {
        const now = Date.now();
        if (this.fsyncChecked === undefined || now - this.fsyncChecked.at > FSYNC_CHECK_MS) {
          this.fsyncChecked = { at: now, problem: await this.fsyncProblem() };
        }
        const problem = this.fsyncChecked.problem;
        return problem === undefined ? { ok: true } : { ok: false, reason: problem };
      }
    }
  }

  /**
   * Makes every write Redis answered before this call durable, as `makeDurable` does for one
   * connection, but shared by many callers (a group commit): one probe write and WAIT on a
   * connection of their own, so a WAIT never holds up the commands of the shared connection.
   * Callers that arrive while a probe is out share the next one, which starts after it.
   */
  async writesDurable(durability: SendingDurability): Promise<DurableOutcome> {
    if (durability.mode !== 'replica') return this.makeDurable(durability);
    if (this.probingNext !== undefined) return this.probingNext;
    if (this.probing === undefined) {
      const probe = this.probe(durability).finally(() => {
        if (this.probing === probe) this.probing = undefined;
      });
      this.probing = probe;
      return probe;
    }
    const next = this.probing
      .catch(() => undefined)
      .then(() => {
        this.probingNext = undefined;
        return this.writesDurable(durability);
      });
    this.probingNext = next;
    return next;
  }

  private async probe(durability: {
    readonly replicas: number;
    readonly timeoutMs: number;
  }): Promise<DurableOutcome> {
    try {
      this.probeConnection ??= (async () => {
        const connection = this.redis.duplicate({ lazyConnect: true });
        connection.on('error', () => undefined);
        await connection.connect();
        return connection;
      })();
      const connection = await this.probeConnection;
      // Written after every write it covers was answered: replicated after them too.
      await connection.incr(this.keys.durabilityProbe());
      return await waitForReplicas(connection, durability);
    } catch (error) {
      this.probeConnection = undefined;
      return {
        ok: false,
        reason: `the durability probe failed: ${error instanceof Error ? error.message : String(error)}`,
      };
    }
  }

  /**
   * Takes back an admission that could not be made durable (withdraw-admission-9.lua): true when
   * it was still ADMITTED with no attempt and is gone, idempotency key included.
   */
  async withdrawAdmission(
    op: Pick<
      NewOperation,
      'tenantId' | 'operationId' | 'idempotencyKey' | 'action' | 'scope' | 'coalesceKey'
    >,
  ): Promise<boolean> {
    const k = this.keys;
    const taken = await this.redis.ledgerWithdrawAdmission(
      k.operation(op.tenantId, op.operationId),
      k.history(op.tenantId, op.operationId),
      k.idempotency(op.tenantId, op.idempotencyKey),
      k.open(op.tenantId),
      k.active(op.tenantId, op.action),
      k.session(op.tenantId, op.scope.sessionId),
      k.outbox(op.tenantId),
      k.coalesce(op.tenantId, op.coalesceKey ?? op.idempotencyKey),
      k.budgetRequests(op.tenantId, op.action),
      op.operationId,
    );
    if (taken !== 1) return false;
    await this.redis.del(k.tenantOf(op.operationId));
    return true;
  }

  /** Closes the durability probes' connection, if one was made. */
  async close(): Promise<void> {
    const connection = this.probeConnection;
    this.probeConnection = undefined;
    (await connection?.catch(() => undefined))?.disconnect();
  }

  private async fsyncProblem(): Promise<string | undefined> {
    try {
      const [, appendonly] = (await this.redis.call('CONFIG', 'GET', 'appendonly')) as string[];
      const [, appendfsync] = (await this.redis.call('CONFIG', 'GET', 'appendfsync')) as string[];
      if (appendonly !== 'yes' || appendfsync !== 'always')
        return `redis runs with appendonly ${String(appendonly)} and appendfsync ${String(appendfsync)}, not yes and always`;
      return undefined;
    } catch (error) {
      return `redis did not say how it persists writes (CONFIG GET): ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  /**
   * The Redis server's clock (ms): the one every time stored or compared in the ledger is on
   * (deadlines, leases, the grace before "not found" is believed), whatever this process's clock says.
   */
  async time(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async releaseLease(tenantId: string, action: string, holder: string): Promise<void> {
    await this.redis.zrem(this.keys.lease(tenantId, action), holder);
  }

  /**
   * Keeps a lease its holder still has until `untilMs` (Redis clock), no longer renewed: the
   * attempt's request may still be at the provider. A lease already gone is not taken again.
   */
  async parkLease(
    tenantId: string,
    action: string,
    holder: string,
    untilMs: number,
  ): Promise<void> {
    // Kept at least until then: a lease held longer is not shortened.
    await this.redis.zadd(this.keys.lease(tenantId, action), 'XX', 'GT', untilMs, holder);
  }

  async spendRetry(
    op: Operation,
    window: { windowMs: number; ratio: number; minimum: number },
  ): Promise<RetryBudgetDecision> {
    const reply = (await this.redis.ledgerRetryBudget(
      this.keys.budgetRequests(op.tenantId, op.action),
      this.keys.budgetRetries(op.tenantId, op.action),
      window.windowMs,
      window.ratio,
      window.minimum,
      `${op.operationId}:${op.attempt}`,
    )) as number[];
    return { allowed: reply[0] === 1, requests: reply[1] ?? 0, retries: reply[2] ?? 0 };
  }

  /**
   * Records a session's delivery forward only (record-delivery-1.lua has the stages): in progress
   * -> spoken / out of band / failed, never back to a duplicate event's decision, and a final
   * record is never replaced. Returns whether it was written, and the record that stands.
   */
  async advanceDelivery(
    op: Pick<Operation, 'tenantId' | 'operationId'> & {
      readonly scope?: Pick<Operation['scope'], 'sessionId'>;
    },
    delivery: DeliveryRecord,
    sessionId?: string,
  ): Promise<{ readonly written: boolean; readonly current?: DeliveryRecord }> {
    const reply = (await this.redis.ledgerRecordDelivery(
      this.keys.operation(op.tenantId, op.operationId),
      deliveryField(op, sessionId),
      JSON.stringify(delivery),
    )) as (number | string | null)[];
    if (reply[0] === 1) return { written: true, current: delivery };
    return {
      written: false,
      current: typeof reply[1] === 'string' ? json<DeliveryRecord>(reply[1]) : undefined,
    };
  }

  /** The delivery record of one session: the operation's own (`op.delivery`), or a joiner's. */
  async deliveryFor(op: Operation, sessionId: string): Promise<DeliveryRecord | undefined> {
    const field = deliveryField(op, sessionId);
    return field === 'delivery'
      ? op.delivery
      : json<DeliveryRecord>(
          (await this.redis.hget(this.keys.operation(op.tenantId, op.operationId), field)) ??
            undefined,
        );
  }

  private async load(tenantId: string, ids: readonly string[]): Promise<Operation[]> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.keys.operation(tenantId, id));
    const results = (await pipeline.exec()) ?? [];
    const out: Operation[] = [];
    for (const [error, hash] of results) {
      if (error === null && hash !== null && typeof hash === 'object' && 'state' in hash)
        out.push(fromHash(hash as Record<string, string>));
    }
    return out;
  }

  private retentionSeconds(money: boolean): number {
    return (money ? this.options.moneyRetentionDays : this.options.retentionDays) * DAY_SECONDS;
  }
}

/** A script's flat field, value, ... reply after its status word, as a hash. */
function pairsToRecord(reply: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 1; i + 1 < reply.length; i += 2) record[reply[i] as string] = reply[i + 1] as string;
  return record;
}

/** Where a session's delivery record is kept: `delivery` for the operation's own session. */
function deliveryField(
  op: { readonly scope?: Pick<Operation['scope'], 'sessionId'> },
  sessionId: string | undefined,
): string {
  return sessionId === undefined || sessionId === op.scope?.sessionId
    ? 'delivery'
    : `delivery:${sessionId}`;
}

function coalesceKeyOf(op: Operation): string {
  return op.coalesceKey ?? op.idempotencyKey;
}

function toFields(op: NewOperation): Record<string, string> {
  const fields: Record<string, string> = {
    operation_id: op.operationId,
    tenant_id: op.tenantId,
    action: op.action,
    kind: op.kind,
    provider: op.provider,
    provider_operation: op.providerOperation,
    idempotency_key: op.idempotencyKey,
    params: JSON.stringify(op.params),
    session_id: op.scope.sessionId,
    owner_gateway: op.scope.ownerGateway,
    provider_idempotent: op.providerIdempotent ? '1' : '0',
    money: op.money ? '1' : '0',
    admission_deadline_at: String(op.admissionDeadlineAt),
    deadline_at: String(op.deadlineAt),
    cancel_requested: '0',
  };
  const optional: [string, string | undefined][] = [
    ['caller', op.scope.caller],
    ['caller_verified', flag(op.scope.callerVerified)],
    ['called', op.scope.called],
    ['agent', op.scope.agent],
    ['agent_version', op.scope.agentVersion],
    ['turn_id', op.scope.turnId],
    ['provider_call_id', op.scope.providerCallId],
    ['response_id', op.scope.responseId],
    ['goal', op.scope.goal],
    ['compensates', op.compensates],
    ['coalesce_key', op.coalesceKey],
  ];
  for (const [name, value] of optional) if (value !== undefined) fields[name] = value;
  return fields;
}

function flag(value: boolean | undefined): string | undefined {
  return value === undefined ? undefined : value ? '1' : '0';
}

function num(value: string | undefined): number | undefined {
  return value === undefined || value === '' ? undefined : Number(value);
}

function json<T>(value: string | undefined): T | undefined {
  if (value === undefined || value === '') return undefined;
  try {
    return JSON.parse(value) as T;
  } catch {
    return undefined;
  }
}

function fromHash(h: Record<string, string>): Operation {
  return {
    operationId: h.operation_id ?? '',
    tenantId: h.tenant_id ?? '',
    action: h.action ?? '',
    kind: (h.kind ?? 'mutation') as ActionKind,
    provider: h.provider ?? '',
    providerOperation: h.provider_operation ?? '',
    idempotencyKey: h.idempotency_key ?? '',
    paramsHash: h.params_hash ?? '',
    params: json<Record<string, unknown>>(h.params) ?? {},
    scope: {
      sessionId: h.session_id ?? '',
      ownerGateway: h.owner_gateway ?? '',
      caller: h.caller,
      callerVerified: h.caller_verified === undefined ? undefined : h.caller_verified === '1',
      called: h.called,
      agent: h.agent,
      agentVersion: h.agent_version,
      turnId: h.turn_id,
      providerCallId: h.provider_call_id,
      responseId: h.response_id,
      goal: h.goal,
    },
    state: (h.state ?? 'REQUESTED') as OperationState,
    attempt: Number(h.attempt ?? '0'),
    attemptToken: h.attempt_token,
    attemptTokens:
      h.attempt_tokens === undefined || h.attempt_tokens === '' ? [] : h.attempt_tokens.split(','),
    sentAttempts: Number(h.sent_attempts ?? h.attempt ?? '0'),
    sending: h.sending === '1',
    uncertain: h.uncertain === '1',
    providerIdempotent: h.provider_idempotent === '1',
    money: h.money === '1',
    createdAt: Number(h.created_at ?? '0'),
    admittedAt: num(h.admitted_at),
    startedAt: num(h.started_at),
    sendingAt: num(h.sending_at),
    committedAt: num(h.committed_at),
    finishedAt: num(h.finished_at),
    reconciledAt: num(h.reconciled_at),
    admissionDeadlineAt: Number(h.admission_deadline_at ?? '0'),
    deadlineAt: Number(h.deadline_at ?? '0'),
    result: json<Record<string, unknown>>(h.result),
    error: json<OperationError>(h.error),
    providerRef: h.provider_ref,
    compensates: h.compensates,
    compensatedBy: h.compensated_by,
    cancelRequested: h.cancel_requested === '1',
    delivery: json<DeliveryRecord>(h.delivery),
    outOfBand: outOfBandOf(h),
    coalesceKey: h.coalesce_key,
  };
}

/** The `oob:<channel>` records (jobs/notify writes them), or undefined when none was queued. */
function outOfBandOf(
  h: Record<string, string>,
): Partial<Record<OutOfBandChannel, OutOfBandRecord>> | undefined {
  const records: Partial<Record<OutOfBandChannel, OutOfBandRecord>> = {};
  for (const channel of OUT_OF_BAND_CHANNELS) {
    const record = json<OutOfBandRecord>(h[`oob:${channel}`]);
    if (record) records[channel] = record;
  }
  return Object.keys(records).length === 0 ? undefined : records;
}

/** WAIT for the connection's writes so far to reach `replicas` replicas within `timeoutMs`. */
async function waitForReplicas(
  connection: Redis,
  durability: { readonly replicas: number; readonly timeoutMs: number },
): Promise<DurableOutcome> {
  const acked = Number(await connection.call('WAIT', durability.replicas, durability.timeoutMs));
  return acked >= durability.replicas
    ? { ok: true }
    : {
        ok: false,
        reason: `${acked} of ${durability.replicas} replicas acknowledged the writes within ${durability.timeoutMs} ms`,
      };
}
