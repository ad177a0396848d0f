/**
 * The tenant's concurrency lease belongs to one attempt, not to the operation. A worker that stalled
 * and was taken over still has its request at the provider: it keeps counting until it ends, and
 * when it ends it gives back its own lease, never the one of the attempt that replaced it. An
 * attempt whose lease expired learns so at renewal and does not take it back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { leasesLost } from '../../../jobs/action-metrics.ts';
import { leaseHolder } from '../../../jobs/ledger/keys.ts';
import type {
  Provider,
  ProviderRequest,
  ProviderResult,
} from '../../../jobs/providers/provider.ts';
import {
  ACTION_NAME,
  jobOf,
  NO_SIGNAL,
  startExecutorFixture,
  TENANT,
  type ExecutorFixture,
} from './executor-fixture.ts';

/**
 * A provider that honours idempotency keys and holds every request until the test lets it answer,
 * measuring how many requests it works on at once.
 */
class HeldProvider implements Provider {
  readonly name = 'held';
  readonly honoursIdempotencyKeys = true;
  readonly supportsCancel = false;
  readonly supportsLookup = false;
  readonly supportsVoid = false;
  readonly timeoutMs = 1_000;
  inFlight = 0;
  maxInFlight = 0;
  /** Effects by idempotency key: a repeated key is not a second effect. */
  readonly effects = new Set<string>();
  private readonly held: { operationId: string; answer: () => void }[] = [];
  private waiters: (() => void)[] = [];

  async execute(request: ProviderRequest): Promise<ProviderResult> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await new Promise<void>((resolve) => {
      this.held.push({ operationId: request.operationId, answer: resolve });
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.inFlight -= 1;
    this.effects.add(request.idempotencyKey);
    return { status: 'ok', result: { done: request.operationId } };
  }

  /** Resolves once a request of `operationId` is held. */
  async arrived(operationId: string): Promise<void> {
    while (!this.held.some((h) => h.operationId === operationId))
      await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Lets the held request of `operationId` answer. */
  answer(operationId: string): void {
    const index = this.held.findIndex((h) => h.operationId === operationId);
    const [request] = this.held.splice(index, 1);
    if (index < 0 || !request) throw new Error(`no request of ${operationId} is held`);
    request.answer();
  }
}

let fx: ExecutorFixture | undefined;
afterEach(async () => {
  await fx?.close();
  fx = undefined;
});

function leases(f: ExecutorFixture): Promise<string[]> {
  return f.redis.zrange(f.ledger.keys.lease(TENANT, ACTION_NAME), 0, -1);
}

describe('when a stalled attempt is taken over while its request is still at the provider', () => {
  it('should keep the action at maxConcurrent=1: the new attempt waits for a lease, the old one gives back only its own', async () => {
    const provider = new HeldProvider();
    const f = (fx = startExecutorFixture({ provider, action: { maxConcurrent: 1 } }));
    const [a, b, c] = [f.executor(), f.executor(), f.executor()];
    const op1 = await f.admit();
    const op2 = await f.admit();

    const first = a.execute(jobOf(op1), NO_SIGNAL); // worker A, attempt 1
    await provider.arrived(op1);
    // Worker B gets the job again after A's lock expired: it takes the operation over as a failed
    // attempt (a retry after the backoff), and A's request still holds the only lease.
    expect(await b.execute(jobOf(op1), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'retry',
    });
    expect(await f.ledger.require(TENANT, op1)).toMatchObject({
      state: 'FAILED_RETRYABLE',
      attempt: 1,
    });
    expect(await c.execute(jobOf(op2), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'no_lease',
    });
    expect(await leases(f)).toEqual([leaseHolder(op1, 1)]);

    // A's answer comes: its move is refused (the operation was taken over) and it gives its lease back.
    provider.answer(op1);
    expect(await first).toMatchObject({ type: 'done' });
    expect(await leases(f)).toEqual([]);

    const second = c.execute(jobOf(op2), NO_SIGNAL);
    await provider.arrived(op2);
    expect(await b.execute(jobOf(op1), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'no_lease',
    });
    provider.answer(op2);
    expect(await second).toEqual({ type: 'done', state: 'COMMITTED' });

    const retry = b.execute(jobOf(op1), NO_SIGNAL); // attempt 2, same key
    await provider.arrived(op1);
    provider.answer(op1);
    expect(await retry).toEqual({ type: 'done', state: 'COMMITTED' });

    expect(provider.maxInFlight).toBe(1);
    expect(provider.effects.size).toBe(2);
    expect(await f.ledger.require(TENANT, op1)).toMatchObject({ state: 'COMMITTED', attempt: 2 });
    expect(await f.ledger.require(TENANT, op2)).toMatchObject({ state: 'COMMITTED', attempt: 1 });
    expect(await leases(f)).toEqual([]);
  });
});

describe('when a running attempt finds its lease gone at renewal', () => {
  it('should count and log the loss, not take the lease back, and not give back the lease another attempt took', async () => {
    const provider = new HeldProvider();
    const leaseTtlMs = 300; // renewed every 100 ms
    const f = (fx = startExecutorFixture({ provider, action: { maxConcurrent: 1 }, leaseTtlMs }));
    const lost = async () =>
      (await leasesLost.get()).values.find(
        (v) => v.labels.tenant === TENANT && v.labels.action === ACTION_NAME,
      )?.value ?? 0;
    const lostBefore = await lost();
    const op1 = await f.admit();
    const running = f.executor().execute(jobOf(op1), NO_SIGNAL);
    await provider.arrived(op1);

    // The lease expired while the worker was stalled, and another attempt took the slot.
    const key = f.ledger.keys.lease(TENANT, ACTION_NAME);
    const { redis } = f;
    const other = leaseHolder('op_other', 1);
    await redis
      .multi()
      .zrem(key, leaseHolder(op1, 1))
      .zadd(key, Date.now() + 60_000, other)
      .exec();
    await expect.poll(lost, { timeout: 2_000 }).toBe(lostBefore + 1);
    expect(await redis.zrange(key, 0, -1)).toEqual([other]);

    provider.answer(op1);
    expect(await running).toEqual({ type: 'done', state: 'COMMITTED' });
    expect(await redis.zrange(key, 0, -1)).toEqual([other]);
    expect(await lost()).toBe(lostBefore + 1);
  });
});

describe('when an operation begins a new attempt', () => {
  it('should need a lease of its own while the previous attempt still holds one', async () => {
    const f = (fx = startExecutorFixture({
      provider: new HeldProvider(),
      action: { maxConcurrent: 1 },
    }));
    const id = await f.admit();
    const lease = { ttlMs: 60_000, max: 1, maxAttempts: 5 };
    const first = await f.ledger.start(jobOf(id), 'held', lease);
    if (first.type !== 'started') throw new Error(first.type);
    await f.ledger.transition(first.operation, {
      from: ['RUNNING'],
      to: 'FAILED_RETRYABLE',
      attempt: 1,
      actor: 'worker',
      reason: 'worker_lost',
    });
    expect(await f.ledger.start(jobOf(id), 'held', lease)).toEqual({ type: 'no_lease' });
    expect(await f.ledger.renewLease(TENANT, ACTION_NAME, leaseHolder(id, 2), 60_000)).toBe(false);
    await f.ledger.releaseLease(TENANT, ACTION_NAME, leaseHolder(id, 1));
    expect(await f.ledger.start(jobOf(id), 'held', lease)).toMatchObject({
      type: 'started',
      operation: { state: 'RUNNING', attempt: 2 },
    });
    expect(await leases(f)).toEqual([leaseHolder(id, 2)]);
  });
});
