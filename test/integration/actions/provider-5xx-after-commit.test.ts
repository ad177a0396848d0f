/**
 * A 5xx is not proof that nothing happened: a proxy answers 502 or 504 after the backend committed,
 * a backend throws 500 after its write. For a provider that ignores idempotency keys a resend is a
 * second refund, so the operation goes UNKNOWN and is reconciled; a provider that honours keys is
 * asked again with the same key. Real Redis, a real HTTP system of record on 127.0.0.1.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  jobOf,
  NO_SIGNAL,
  startExecutorFixture,
  TENANT,
  type ExecutorFixture,
} from './executor-fixture.ts';
import {
  startProxiedProvider,
  type ExchangePlan,
  type ProxiedProvider,
} from './proxied-provider.ts';

let system: ProxiedProvider | undefined;
let fx: ExecutorFixture | undefined;

afterEach(async () => {
  await fx?.close();
  await system?.close();
  fx = undefined;
  system = undefined;
});

async function start(
  honoursIdempotencyKeys: boolean,
  plan: (n: number) => ExchangePlan,
  action: Record<string, unknown> = {},
) {
  system = await startProxiedProvider({ name: 'pay', honoursIdempotencyKeys, plan });
  fx = startExecutorFixture({ provider: system.provider, action });
  return { system, fx };
}

const PASS: ExchangePlan = { backend: 'commit' };

describe('when a provider that ignores idempotency keys commits a refund and the answer is a 5xx', () => {
  it.each([
    [500, ''],
    [502, '<html><body>502 Bad Gateway</body></html>'],
    [504, 'upstream request timeout'],
    [503, 'upstream connect error or disconnect/reset before headers'],
  ])(
    'should not send it again after %i: UNKNOWN, not cancellable, then COMMITTED by reconciliation with one refund',
    async (status, text) => {
      const { system, fx } = await start(false, (n) =>
        n === 1 ? { backend: 'commit', proxy: { status, text } } : PASS,
      );
      const id = await fx.admit();
      const executor = fx.executor();

      expect(await executor.execute(jobOf(id), NO_SIGNAL)).toEqual({
        type: 'done',
        state: 'UNKNOWN',
      });
      // A later run of the job (a retry, a redelivery) sends nothing.
      expect(await executor.execute(jobOf(id), NO_SIGNAL)).toMatchObject({
        type: 'done',
        state: 'UNKNOWN',
      });
      // The refund may exist: cancel must not claim it never happened.
      expect(await fx.cancellation.request(TENANT, id)).toEqual({
        type: 'not_cancellable',
        operationId: id,
        state: 'UNKNOWN',
        reason: 'unknown_reconcile_first',
      });

      expect(await fx.reconciler.reconcile(TENANT, id, 0)).toEqual({
        type: 'resolved',
        state: 'COMMITTED',
      });
      const op = await fx.ledger.require(TENANT, id);
      expect(op).toMatchObject({
        state: 'COMMITTED',
        result: { refund_id: 'rf_1' },
        providerRef: 'rf_1',
      });
      expect((await fx.ledger.history(TENANT, id)).map((e) => e.state)).toEqual([
        'REQUESTED',
        'ADMITTED',
        'RUNNING',
        'UNKNOWN',
        'COMMITTED',
      ]);
      expect(system.requests).toHaveLength(1);
      expect(system.effects).toHaveLength(1);
    },
  );

  it("should retry a 503 in the system of record's own error format (it turned the request away) and refund once", async () => {
    const { system, fx } = await start(false, (n) => (n === 1 ? { backend: 'refuse' } : PASS));
    const id = await fx.admit();
    const executor = fx.executor();
    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'retry',
    });
    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toEqual({
      type: 'done',
      state: 'COMMITTED',
    });
    expect(await fx.ledger.require(TENANT, id)).toMatchObject({ state: 'COMMITTED', attempt: 2 });
    expect(system.requests).toHaveLength(2);
    expect(system.effects).toHaveLength(1);
  });
});

describe('when a provider that honours idempotency keys commits and its proxy answers 504', () => {
  it('should send it again with the same key, refuse to cancel it as if nothing happened, and record the one commit', async () => {
    const { system, fx } = await start(true, (n) =>
      n === 1 ? { backend: 'commit', proxy: { status: 504, text: 'gateway timeout' } } : PASS,
    );
    const id = await fx.admit();
    const executor = fx.executor();

    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'retry',
    });
    expect(await fx.ledger.require(TENANT, id)).toMatchObject({
      state: 'FAILED_RETRYABLE',
      uncertain: true,
    });
    // Between attempts the first one may have committed: not "cancelled at once".
    expect(await fx.cancellation.request(TENANT, id)).toMatchObject({
      type: 'not_cancellable',
      reason: 'running_without_cancel',
    });

    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toEqual({
      type: 'done',
      state: 'COMMITTED',
    });
    expect(await fx.ledger.require(TENANT, id)).toMatchObject({
      state: 'COMMITTED',
      attempt: 2,
      result: { refund_id: 'rf_1' },
    });
    const op = await fx.ledger.require(TENANT, id);
    expect(system.requests.map((r) => r.idempotencyKey)).toEqual([
      op.idempotencyKey,
      op.idempotencyKey,
    ]);
    expect(system.effects).toHaveLength(1);
  });

  it('should end UNKNOWN, not FAILED_FINAL, when its attempts run out on 504s, and reconcile to the commit', async () => {
    const gatewayTimeout: ExchangePlan = {
      backend: 'commit',
      proxy: { status: 504, text: 'gateway timeout' },
    };
    const { system, fx } = await start(true, () => gatewayTimeout, {
      retry: {
        maxAttempts: 2,
        backoffMs: 10,
        maxBackoffMs: 20,
        budgetRatio: 1,
        budgetWindowSeconds: 60,
        budgetMinRetries: 10,
      },
    });
    const id = await fx.admit();
    const executor = fx.executor();

    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toMatchObject({
      type: 'delay',
      reason: 'retry',
    });
    expect(await executor.execute(jobOf(id), NO_SIGNAL)).toEqual({
      type: 'done',
      state: 'UNKNOWN',
    });
    expect(await fx.reconciler.reconcile(TENANT, id, 0)).toEqual({
      type: 'resolved',
      state: 'COMMITTED',
    });
    expect(await fx.ledger.require(TENANT, id)).toMatchObject({
      state: 'COMMITTED',
      result: { refund_id: 'rf_1' },
    });
    expect(system.requests).toHaveLength(2);
    expect(system.effects).toHaveLength(1);
  });
});
