import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';

let h: Harness;
const retry = (overrides: Record<string, unknown>) => ({
  maxAttempts: 5,
  backoffMs: 50,
  maxBackoffMs: 400,
  budgetRatio: 1,
  budgetWindowSeconds: 60,
  budgetMinRetries: 10,
  ...overrides,
});

beforeAll(async () => {
  h = await startHarness({
    tenants: {
      'tenant-flaky': { book_table: { ...BOOK, retry: retry({}) } },
      'tenant-attempts': { book_table: { ...BOOK, retry: retry({ maxAttempts: 2 }) } },
      'tenant-budget': {
        book_table: { ...BOOK, retry: retry({ budgetRatio: 0, budgetMinRetries: 1 }) },
      },
      'tenant-deadline': {
        book_table: {
          ...BOOK,
          deadlineMs: 700,
          admissionDeadlineMs: 500,
          retry: retry({ backoffMs: 300, maxBackoffMs: 300 }),
        },
      },
    },
  });
  await h.sandbox.addRule({
    fault: 'error=503',
    tenant: 'tenant-flaky',
    operation: 'book',
    nth: 1,
    times: 2,
  });
  for (const tenant of ['tenant-attempts', 'tenant-budget', 'tenant-deadline'])
    await h.sandbox.addRule({ fault: 'error=503', tenant, operation: 'book' });
});
afterAll(async () => h.close());

async function run(tenantId: string) {
  const decision = await h.layer.admit({
    tenantId,
    action: 'book_table',
    args: booking(),
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
  const op = await h.layer.waitFor(tenantId, decision.operationId, 15_000);
  const history = await h.layer.ledger.history(tenantId, decision.operationId);
  const counts = await h.sandbox.counts();
  return {
    op,
    history,
    requests: counts.requests[decision.operationId] ?? 0,
    effects: counts.effects[decision.operationId] ?? 0,
  };
}

describe('when the provider fails twice with 503 and then succeeds', () => {
  it('should retry with growing delays and commit once, on attempt 3', async () => {
    const { op, history, requests, effects } = await run('tenant-flaky');
    expect(op?.state).toBe('COMMITTED');
    expect(op?.attempt).toBe(3);
    expect(requests).toBe(3);
    expect(effects).toBe(1);
    expect(history.map((e) => e.state)).toEqual([
      'REQUESTED',
      'ADMITTED',
      'RUNNING',
      'FAILED_RETRYABLE',
      'RUNNING',
      'FAILED_RETRYABLE',
      'RUNNING',
      'COMMITTED',
    ]);
    const failed = history.filter((e) => e.state === 'FAILED_RETRYABLE');
    const restarted = history.filter((e) => e.state === 'RUNNING').slice(1);
    // Each retry waits at least the base backoff after its failure.
    restarted.forEach((entry, i) =>
      expect(entry.at - (failed[i]?.at ?? 0)).toBeGreaterThanOrEqual(45),
    );
  });
});

describe('when the provider keeps failing', () => {
  it('should stop at maxAttempts with FAILED_FINAL and no effect', async () => {
    const { op, history, requests, effects } = await run('tenant-attempts');
    expect(op?.state).toBe('FAILED_FINAL');
    expect(requests).toBe(2);
    expect(effects).toBe(0);
    expect(history.at(-1)).toMatchObject({ state: 'FAILED_FINAL', reason: 'attempts_exhausted' });
    expect(op?.error?.code).toBeDefined();
  });

  it('should fail final and count it once the retry budget is spent', async () => {
    const counter = async () =>
      (await registry.getSingleMetric('callgate_retry_budget_exhausted_total')?.get())?.values.find(
        (v) => v.labels.action === 'book_table',
      )?.value ?? 0;
    const before = await counter();
    const first = await run('tenant-budget');
    const second = await run('tenant-budget');
    // The budget allows one retry in the window: the first operation spends it, the second gets none.
    expect(first.requests).toBe(2);
    expect(second.requests).toBe(1);
    expect(second.history.at(-1)).toMatchObject({
      state: 'FAILED_FINAL',
      reason: 'retry_budget_exhausted',
    });
    expect((await counter()) - before).toBeGreaterThanOrEqual(2);
  });

  it('should not retry past the operation deadline', async () => {
    const { op, history, requests } = await run('tenant-deadline');
    expect(op?.state).toBe('FAILED_FINAL');
    // Given up at the deadline; on a machine slow enough that an attempt's 503 arrived after the
    // provider timeout, the attempt's outcome was unknown, so it was looked up first (not found).
    expect(['deadline', 'reconciled_not_found_after_deadline']).toContain(history.at(-1)?.reason);
    expect(requests).toBeLessThanOrEqual(3);
    // No attempt starts after the 700 ms deadline; a lookup after an unknown outcome may add its grace.
    expect(
      history.filter((e) => e.state === 'RUNNING').every((e) => e.at - (op?.createdAt ?? 0) < 700),
    ).toBe(true);
    expect((op?.finishedAt ?? 0) - (op?.createdAt ?? 0)).toBeLessThan(3_000);
  });
});
