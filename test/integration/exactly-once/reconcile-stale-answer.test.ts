/**
 * Class: reconciler moves not fenced by attempt. A reconcile job reads the operation at attempt 1
 * and is held up in its lookup (paused past its lock); meanwhile a redelivered copy of the job
 * reconciles attempt 1 ("not found", voided, sent again) and attempt 2 goes UNKNOWN in its turn. The
 * held job's answer then is about an attempt that is no longer current: its move is refused and the
 * operation is looked at again, so no third attempt is sent. Real Redis and the sandbox over HTTP;
 * the pause is a lookup held by the test, so the interleaving is the same on every run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reconciler } from '../../../jobs/execution/reconciler.ts';
import { createProviders } from '../../../jobs/providers/registry.ts';
import type { LookupResult, Provider, ProviderRequest } from '../../../jobs/providers/provider.ts';
import { quietLog, REFUND, startHarness, type Harness } from '../../support/action-harness.ts';

const TENANT = 'tenant-stale-reconcile';

/** The harness's sandbox payments provider, with lookups that wait for the test when asked to. */
function withHeldLookups(provider: Provider): {
  provider: Provider;
  hold(): void;
  release(): void;
} {
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  const held: Provider = {
    name: provider.name,
    honoursIdempotencyKeys: provider.honoursIdempotencyKeys,
    supportsCancel: provider.supportsCancel,
    supportsLookup: provider.supportsLookup,
    supportsVoid: provider.supportsVoid,
    timeoutMs: provider.timeoutMs,
    execute: (request) => provider.execute(request),
    voidAttempts: provider.voidAttempts?.bind(provider),
    lookup: async (request: Omit<ProviderRequest, 'params'>): Promise<LookupResult> => {
      const answer = await (provider.lookup as NonNullable<Provider['lookup']>)(request);
      await gate;
      return answer;
    },
  };
  return {
    provider: held,
    hold: () => {
      gate = new Promise((resolve) => (open = resolve));
    },
    release: () => open?.(),
  };
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        refund: { ...REFUND, retry: { maxAttempts: 5, backoffMs: 10, maxBackoffMs: 20 } },
      },
    },
    workers: false,
  });
});
afterAll(async () => h.close());

describe('when a reconcile answer arrives after another attempt began', () => {
  it('should refuse the stale move and leave the current attempt UNKNOWN, sending nothing more', async () => {
    const { ledger } = h.layer;
    const payments = createProviders(h.config).get('payments');
    if (!payments) throw new Error('no payments provider');
    const held = withHeldLookups(payments);
    const reconciler = (provider: Provider) =>
      new Reconciler({
        ledger,
        queues: h.layer.queues,
        providers: new Map([['payments', provider]]),
        actionConfig: (t, a) => h.config.tenants.find((x) => x.id === t)?.actions[a],
        log: quietLog,
        graceMs: 0,
        backoffMs: 10,
        maxBackoffMs: 1_000,
      });
    const decision = await h.layer.admit({
      tenantId: TENANT,
      action: 'refund',
      args: { order_id: 'ord_1030', amount_cents: 300 },
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    const job = { tenantId: TENANT, operationId: id, action: 'refund' };
    const limits = { ttlMs: 60_000, max: 4, maxAttempts: 5 };

    // Attempt 1 was lost on its way (it never reached the sandbox): UNKNOWN.
    const one = await ledger.start(job, 'payments', limits);
    if (one.type !== 'started') throw new Error(one.type);
    await ledger.transition(one.operation, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: 1,
      token: one.operation.attemptToken,
      actor: 'worker',
      reason: 'timeout',
      lease: { mode: 'park', forMs: 1_000 },
    });

    // Reconcile job A reads attempt 1 and is held in its lookup.
    held.hold();
    const stale = reconciler(held.provider).reconcile(TENANT, id, 0);
    // Its redelivered copy B reconciles attempt 1 at once: not found, voided, sent again.
    expect(await reconciler(payments).reconcile(TENANT, id, 0)).toEqual({
      type: 'resolved',
      state: 'FAILED_RETRYABLE',
    });
    const two = await ledger.start(job, 'payments', limits);
    if (two.type !== 'started') throw new Error(two.type);
    await ledger.transition(two.operation, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: 2,
      token: two.operation.attemptToken,
      actor: 'worker',
      reason: 'timeout',
      lease: { mode: 'park', forMs: 1_000 },
    });

    // A's "not found" about attempt 1 arrives now.
    held.release();
    const answer = await stale;
    expect(answer.type).toBe('again');
    expect(answer.type === 'again' ? answer.reason : '').toContain('stale');
    expect(await ledger.get(TENANT, id)).toMatchObject({ state: 'UNKNOWN', attempt: 2 });
    const history = await ledger.history(TENANT, id);
    expect(history.filter((e) => e.state === 'RUNNING').map((e) => e.attempt)).toEqual([1, 2]);
    expect(history.filter((e) => e.actor === 'reconciler')).toHaveLength(1);
  });
});
