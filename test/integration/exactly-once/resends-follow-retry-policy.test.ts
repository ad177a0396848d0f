/**
 * Class: resends that skip the retry policy. A refund against a provider that answers 500 to every
 * request (an unknown outcome for a provider without idempotency keys) is reconciled each time
 * ("not found", then its attempt voided) and sent again only as an attempt of the retry policy:
 * at most retry.maxAttempts requests, spaced by the backoff, then FAILED_FINAL. Real worker
 * process, the sandbox over HTTP with a fault rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor, type StartedProcess } from '../../support/processes.ts';
import { startWorkerProcess, stopWorkerProcess } from '../../support/worker-process.ts';

const TENANT = 'tenant-failing-payments';
const MAX_ATTEMPTS = 3;
const BACKOFF_MS = 300;

let h: Harness;
let worker: StartedProcess;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        refund: {
          ...REFUND,
          deadlineMs: 60_000,
          retry: { maxAttempts: MAX_ATTEMPTS, backoffMs: BACKOFF_MS, maxBackoffMs: BACKOFF_MS * 4 },
        },
      },
    },
    workers: false,
  });
  await h.sandbox.addRule({
    fault: 'error=500',
    service: 'payments',
    operation: 'refund',
    tenant: TENANT,
  });
  worker = await startWorkerProcess(h);
});
afterAll(async () => {
  await stopWorkerProcess(worker);
  await h.close();
});

describe('when every attempt of a refund ends with an unknown outcome', () => {
  it('should send at most maxAttempts requests, each after the backoff, and then fail for good', async () => {
    const decision = await h.layer.admit({
      tenantId: TENANT,
      action: 'refund',
      args: { order_id: 'ord_1020', amount_cents: 900 },
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    const op = await waitFor(
      async () => {
        const current = await h.layer.ledger.get(TENANT, id);
        return current?.state === 'FAILED_FINAL' ? current : undefined;
      },
      30_000,
      'the refund to fail for good',
    );

    expect((await h.sandbox.counts()).requests[id]).toBe(MAX_ATTEMPTS);
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(0);
    expect(op.attempt).toBe(MAX_ATTEMPTS);
    const history = await h.layer.ledger.history(TENANT, id);
    const sends = history.filter((e) => e.state === 'RUNNING');
    expect(sends.map((e) => e.attempt)).toEqual([1, 2, 3]);
    // Each resend waited for its reconciliation and then for the backoff.
    for (let i = 1; i < sends.length; i++) {
      const reconciled = history.find((e) => e.state === 'FAILED_RETRYABLE' && e.attempt === i);
      expect(reconciled?.reason).toBe('reconciled_not_found');
      expect((sends[i]?.at ?? 0) - (reconciled?.at ?? 0)).toBeGreaterThanOrEqual(BACKOFF_MS - 5);
    }
    expect(history.at(-1)).toMatchObject({
      state: 'FAILED_FINAL',
      reason: 'reconciled_not_found_attempts_exhausted',
    });
  });
});
