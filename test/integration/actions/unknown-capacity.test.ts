import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { testRedis } from '../../support/redis.ts';
import { waitFor } from '../../support/processes.ts';

/** One refund at a time, refused (not queued) when one is active. */
const ONE_REFUND = {
  ...REFUND,
  provider: 'payments_nolookup',
  policy: 'reject',
  maxConcurrent: 1,
  maxQueued: 0,
};

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: { 'tenant-capacity': { refund: ONE_REFUND } },
    providers: (url) => ({
      payments_nolookup: {
        type: 'http',
        baseUrl: `${url}/payments`,
        honoursIdempotencyKeys: false,
        supportsLookup: false,
        timeoutMs: 1_000,
      },
    }),
  });
});
afterAll(async () => h.close());

const refund = (order: string) => ({ order_id: order, amount_cents: 100, reason: 'cold soup' });

describe('when an operation stays UNKNOWN because its provider cannot look it up', () => {
  it('should give its place under the action capacity back, and stay listed and counted as UNKNOWN', async () => {
    const redis = testRedis();
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=3000',
      tenant: 'tenant-capacity',
      operation: 'refund',
      nth: 1,
    });
    const first = await h.layer.admit({
      tenantId: 'tenant-capacity',
      action: 'refund',
      args: refund('ord_1002'),
      scope: h.scope(),
    });
    if (first.type !== 'started') throw new Error(first.type);
    await waitFor(
      async () =>
        (await h.layer.ledger.rawField(
          { tenantId: 'tenant-capacity', operationId: first.operationId },
          'reconcile_stuck',
        )) === '1'
          ? true
          : undefined,
      15_000,
      'reconciliation to give up',
    );
    expect((await h.layer.ledger.get('tenant-capacity', first.operationId))?.state).toBe('UNKNOWN');

    // Nothing runs for the UNKNOWN refund: an unrelated refund is admitted, not answered busy.
    const second = await h.layer.admit({
      tenantId: 'tenant-capacity',
      action: 'refund',
      args: refund('ord_1003'),
      scope: h.scope(),
    });
    expect(second.type).toBe('started');
    const active = await redis.zrange(
      h.layer.ledger.keys.active('tenant-capacity', 'refund'),
      0,
      -1,
    );
    expect(active).not.toContain(first.operationId);

    // Operators still see it: listed, and counted by the UNKNOWN gauge.
    expect(
      (await h.layer.ledger.listUnknown('tenant-capacity')).map((u) => u.operation.operationId),
    ).toEqual([first.operationId]);
    await h.layer.sweepNow();
    const gauge = (
      await registry.getSingleMetric('callgate_operations_unknown')?.get()
    )?.values.find((v) => v.labels.tenant === 'tenant-capacity');
    expect(gauge?.value).toBe(1);
    redis.disconnect();
  });
});
