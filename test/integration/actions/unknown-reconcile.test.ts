import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openMetricsText, registry } from '../../../config/metrics.ts';
import { BOOK, booking, REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      'tenant-unknown': { refund: { ...REFUND } },
      'tenant-nolookup': { refund: { ...REFUND, provider: 'payments_nolookup' } },
      'tenant-lost': { refund: { ...REFUND } },
      'tenant-uncertain': {
        book_table: {
          ...BOOK,
          provider: 'bookings_novoid',
          retry: {
            maxAttempts: 2,
            backoffMs: 50,
            maxBackoffMs: 100,
            budgetRatio: 1,
            budgetWindowSeconds: 60,
            budgetMinRetries: 10,
          },
        },
      },
      'tenant-garbage': {
        refund: { ...REFUND },
        book_table: {
          ...BOOK,
          retry: {
            maxAttempts: 3,
            backoffMs: 20,
            maxBackoffMs: 100,
            budgetRatio: 1,
            budgetWindowSeconds: 60,
            budgetMinRetries: 10,
          },
        },
      },
    },
    providers: (url) => ({
      payments_nolookup: {
        type: 'http',
        baseUrl: `${url}/payments`,
        honoursIdempotencyKeys: false,
        supportsLookup: false,
        timeoutMs: 1_000,
      },
      bookings_novoid: {
        type: 'http',
        baseUrl: `${url}/bookings`,
        honoursIdempotencyKeys: true,
        supportsVoid: false,
        timeoutMs: 1_000,
      },
    }),
  });
});
afterAll(async () => h.close());

const refund = (order: string) => ({ order_id: order, amount_cents: 100, reason: 'cold soup' });

describe('when a refund commits but the answer times out', () => {
  it('should go UNKNOWN, never send a second request, and reconcile to COMMITTED with the real result', async () => {
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=3000',
      tenant: 'tenant-unknown',
      operation: 'refund',
      nth: 1,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-unknown',
      action: 'refund',
      args: refund('ord_1002'),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    const op = await h.layer.waitFor('tenant-unknown', id, 15_000);
    expect(op?.state).toBe('COMMITTED');
    const history = await h.layer.ledger.history('tenant-unknown', id);
    expect(history.map((e) => e.state)).toEqual([
      'REQUESTED',
      'ADMITTED',
      'RUNNING',
      'UNKNOWN',
      'COMMITTED',
    ]);
    expect(history.at(-1)).toMatchObject({ actor: 'reconciler', reason: 'reconciled_committed' });
    const effects = await h.sandbox.effects({ reference: id });
    expect(effects).toHaveLength(1);
    expect(op?.result).toEqual(effects[0]?.result);
    expect((await h.sandbox.counts()).requests[id]).toBe(1);
  });
});

describe('when the provider cannot look operations up', () => {
  it('should leave the operation UNKNOWN, listed and counted, and never resend', async () => {
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=3000',
      tenant: 'tenant-nolookup',
      operation: 'refund',
    });
    const before =
      (await registry.getSingleMetric('callgate_reconciliations_total')?.get())?.values.find(
        (v) => v.labels.outcome === 'no_lookup',
      )?.value ?? 0;
    const decision = await h.layer.admit({
      tenantId: 'tenant-nolookup',
      action: 'refund',
      args: refund('ord_1003'),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    await waitFor(
      async () =>
        ((await registry.getSingleMetric('callgate_reconciliations_total')?.get())?.values.find(
          (v) => v.labels.outcome === 'no_lookup',
        )?.value ?? 0) > before || undefined,
      10_000,
      'the no_lookup reconciliation',
    );
    const op = await h.layer.ledger.get('tenant-nolookup', id);
    expect(op?.state).toBe('UNKNOWN');
    expect(
      (await h.layer.ledger.listUnknown('tenant-nolookup')).map((u) => u.operation.operationId),
    ).toEqual([id]);
    await h.layer.sweepNow();
    const gauge = (
      await registry.getSingleMetric('callgate_operations_unknown')?.get()
    )?.values.find((v) => v.labels.tenant === 'tenant-nolookup');
    expect(gauge?.value).toBe(1);
    expect((await h.sandbox.counts()).requests[id]).toBe(1);
    // The UNKNOWN count leads to the operation itself: its exemplar in an OpenMetrics scrape.
    const opened = (await openMetricsText())
      .split('\n')
      .find((line) => line.startsWith('callgate_unknown_opened_total{action="refund"}'));
    expect(opened).toContain(
      `# {operation_id="${id}",session_id="${op?.scope.sessionId ?? ''}"} 1 `,
    );
  });
});

describe('when the request never reached the provider before the answer was lost', () => {
  it('should reconcile "not found" after the grace period and run it again, committing exactly once', async () => {
    await h.sandbox.addRule({
      fault: 'drop-before-commit',
      tenant: 'tenant-lost',
      operation: 'refund',
      nth: 1,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-lost',
      action: 'refund',
      args: refund('ord_1004'),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    const op = await h.layer.waitFor('tenant-lost', id, 15_000);
    expect(op?.state).toBe('COMMITTED');
    const states = (await h.layer.ledger.history('tenant-lost', id)).map((e) => e.state);
    expect(states).toEqual([
      'REQUESTED',
      'ADMITTED',
      'RUNNING',
      'UNKNOWN',
      'FAILED_RETRYABLE',
      'RUNNING',
      'COMMITTED',
    ]);
    expect((await h.sandbox.counts()).effects[id]).toBe(1);
  });
});

describe('when a provider answers garbage after committing', () => {
  it('should retry an idempotent booking with the same key and commit once, the worker unharmed', async () => {
    await h.sandbox.addRule({
      fault: 'garbage-after-commit',
      tenant: 'tenant-garbage',
      operation: 'book',
      nth: 1,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-garbage',
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const op = await h.layer.waitFor('tenant-garbage', decision.operationId, 10_000);
    expect(op?.state).toBe('COMMITTED');
    expect(
      (await h.layer.ledger.history('tenant-garbage', decision.operationId)).map((e) => e.state),
    ).toEqual(['REQUESTED', 'ADMITTED', 'RUNNING', 'FAILED_RETRYABLE', 'RUNNING', 'COMMITTED']);
    // The retry first voids the earlier attempt: the provider answers that it committed, so
    // nothing is sent again (the key would have deduped it anyway).
    expect(
      (await h.layer.ledger.history('tenant-garbage', decision.operationId)).at(-1)?.reason,
    ).toBe('earlier_attempt_committed');
    const counts = await h.sandbox.counts();
    expect(counts.requests[decision.operationId]).toBe(1);
    expect(counts.effects[decision.operationId]).toBe(1);
  });

  it('should make a non-idempotent refund UNKNOWN, not retry it, and reconcile it', async () => {
    await h.sandbox.addRule({
      fault: 'garbage-after-commit',
      tenant: 'tenant-garbage',
      operation: 'refund',
      nth: 1,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-garbage',
      action: 'refund',
      args: refund('ord_1005'),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const op = await h.layer.waitFor('tenant-garbage', decision.operationId, 10_000);
    expect(op?.state).toBe('COMMITTED');
    expect(
      (await h.layer.ledger.history('tenant-garbage', decision.operationId)).map((e) => e.state),
    ).toContain('UNKNOWN');
    expect((await h.sandbox.counts()).requests[decision.operationId]).toBe(1);
  });
});

describe('when an idempotent booking lost its answer and then runs out of attempts', () => {
  it('should ask the provider (UNKNOWN) instead of claiming failure, and find the commit', async () => {
    // The first attempt commits and its answer is held past the client timeout; the retry with the
    // same key meets a 503 and the attempts run out. Only the first attempt's outcome is unknown.
    // The provider here cannot void, so the retry is sent without asking first.
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=2500',
      tenant: 'tenant-uncertain',
      operation: 'book',
      nth: 1,
    });
    await h.sandbox.addRule({
      fault: 'error=503',
      tenant: 'tenant-uncertain',
      operation: 'book',
      nth: 2,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-uncertain',
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const op = await h.layer.waitFor('tenant-uncertain', decision.operationId, 15_000);
    expect(op?.state).toBe('COMMITTED');
    const states = (await h.layer.ledger.history('tenant-uncertain', decision.operationId)).map(
      (e) => e.state,
    );
    expect(
      states,
      JSON.stringify(await h.layer.ledger.history('tenant-uncertain', decision.operationId)),
    ).toContain('UNKNOWN');
    expect(states).not.toContain('FAILED_FINAL');
    expect((await h.sandbox.counts()).effects[decision.operationId]).toBe(1);
  });
});
