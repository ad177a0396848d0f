/**
 * A cancel confirmed by the provider is about one request, that is one attempt: it must not mark a
 * newer attempt CANCELLED, and the attempt it stopped must record CANCELLED even though the cancel
 * was asked for after the attempt began. Real Redis; a provider whose answers the test releases.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { leaseHolder } from '../../../jobs/ledger/keys.ts';
import type {
  CancelResult,
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

/** Something the test releases later with a value. */
class Held<T> {
  private release: ((value: T) => void) | undefined;
  private arrivedWake: (() => void) | undefined;
  private readonly arrival = new Promise<void>((resolve) => (this.arrivedWake = resolve));
  calls = 0;

  wait(): Promise<T> {
    this.calls += 1;
    const answer = new Promise<T>((resolve) => (this.release = resolve));
    this.arrivedWake?.();
    return answer;
  }

  arrived(): Promise<void> {
    return this.arrival;
  }

  answer(value: T): void {
    if (!this.release) throw new Error('nothing is held');
    this.release(value);
  }
}

class CancellableProvider implements Provider {
  readonly name = 'cancellable';
  readonly honoursIdempotencyKeys = true;
  readonly supportsCancel = true;
  readonly supportsLookup = false;
  readonly supportsVoid = false;
  readonly timeoutMs = 1_000;
  execution = new Held<ProviderResult>();
  cancellation: Held<CancelResult> | undefined;

  execute(_request: ProviderRequest): Promise<ProviderResult> {
    return this.execution.wait();
  }

  async cancel(_request: Omit<ProviderRequest, 'params'>): Promise<CancelResult> {
    return this.cancellation ? this.cancellation.wait() : { status: 'cancelled' };
  }
}

let fx: ExecutorFixture | undefined;
afterEach(async () => {
  await fx?.close();
  fx = undefined;
});

describe('when the provider confirms a cancel after the attempt it was about has been replaced', () => {
  it('should leave the newer attempt RUNNING and ask again, then cancel that one', async () => {
    const provider = new CancellableProvider();
    const f = (fx = startExecutorFixture({ provider }));
    const id = await f.admit();
    const lease = { ttlMs: 60_000, max: 4, maxAttempts: 5 };
    const first = await f.ledger.start(jobOf(id), provider.name, lease);
    if (first.type !== 'started') throw new Error(first.type);

    provider.cancellation = new Held<CancelResult>();
    const cancelling = f.canceller.process(TENANT, id); // asks about attempt 1
    await provider.cancellation.arrived();
    // Attempt 1 ends retryably and attempt 2 starts: a new request at the provider.
    await f.ledger.transition(first.operation, {
      from: ['RUNNING'],
      to: 'FAILED_RETRYABLE',
      attempt: 1,
      actor: 'worker',
      reason: 'injected',
    });
    await f.ledger.releaseLease(TENANT, ACTION_NAME, leaseHolder(id, 1));
    expect(await f.ledger.start(jobOf(id), provider.name, lease)).toMatchObject({
      type: 'started',
      operation: { attempt: 2 },
    });
    provider.cancellation.answer({ status: 'cancelled' });

    expect(await cancelling).toEqual({ type: 'again', delayMs: 0 });
    expect(await f.ledger.require(TENANT, id)).toMatchObject({ state: 'RUNNING', attempt: 2 });

    provider.cancellation = undefined;
    expect(await f.canceller.process(TENANT, id)).toEqual({ type: 'done', note: 'cancelled' });
    expect(await f.ledger.require(TENANT, id)).toMatchObject({ state: 'CANCELLED', attempt: 2 });
    expect((await f.ledger.history(TENANT, id)).at(-1)).toMatchObject({
      state: 'CANCELLED',
      attempt: 2,
      reason: 'provider_confirmed_cancel',
    });
  });
});

describe('when a cancel is requested while the attempt runs and the provider answers the request "cancelled"', () => {
  it('should record CANCELLED, not FAILED_FINAL', async () => {
    const provider = new CancellableProvider();
    const f = (fx = startExecutorFixture({ provider }));
    const id = await f.admit();
    const running = f.executor().execute(jobOf(id), NO_SIGNAL);
    await provider.execution.arrived();

    expect(await f.cancellation.request(TENANT, id)).toEqual({
      type: 'requested',
      operationId: id,
    });
    provider.execution.answer({
      status: 'failed',
      retryable: false,
      code: 'cancelled',
      message: "cancelled at the caller's request",
    });

    expect(await running).toEqual({ type: 'done', state: 'CANCELLED' });
    expect(await f.ledger.require(TENANT, id)).toMatchObject({ state: 'CANCELLED', attempt: 1 });
    expect((await f.ledger.history(TENANT, id)).at(-1)).toMatchObject({
      state: 'CANCELLED',
      reason: 'cancelled_by_provider',
    });
    expect(provider.execution.calls).toBe(1);
  });
});
