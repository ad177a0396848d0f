/**
 * Class: a lease given back while the request is still at the provider. A refund slower than the
 * provider timeout goes UNKNOWN; its attempt keeps the tenant's only lease (maxConcurrent 1) until
 * reconciliation settles it, so the second refund of the tenant reaches the sandbox only after the
 * first has left it. Real worker process, the sandbox over HTTP, its concurrency report.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor, type StartedProcess } from '../../support/processes.ts';
import { startWorkerProcess, stopWorkerProcess } from '../../support/worker-process.ts';

const TENANT = 'tenant-slow-refunds';
/** Above the provider timeout (1 s), below the timeout plus the reconcile grace (2.2 s). */
const SLOW_REFUND_MS = 1_800;

let h: Harness;
let worker: StartedProcess;
beforeAll(async () => {
  h = await startHarness({
    tenants: { [TENANT]: { refund: { ...REFUND, maxConcurrent: 1 } } },
    workers: false,
  });
  await h.sandbox.addRule({
    fault: `latency=${SLOW_REFUND_MS}`,
    service: 'payments',
    operation: 'refund',
    tenant: TENANT,
    nth: 1,
  });
  worker = await startWorkerProcess(h);
});
afterAll(async () => {
  await stopWorkerProcess(worker);
  await h.close();
});

describe('when a refund is slower than the provider timeout', () => {
  it('should keep its lease until the outcome is settled: the provider never sees two refunds of the tenant at once', async () => {
    const admit = async (order: string) => {
      const decision = await h.layer.admit({
        tenantId: TENANT,
        action: 'refund',
        args: { order_id: order, amount_cents: 500, reason: 'late delivery' },
        scope: h.scope(),
      });
      if (decision.type !== 'started') throw new Error(decision.type);
      return decision.operationId;
    };
    const first = await admit('ord_1001');
    await waitFor(
      async () =>
        (await h.sandbox.concurrency()).tenants[TENANT]?.current === 1 ? true : undefined,
      10_000,
      'the first refund at the sandbox',
    );
    const second = await admit('ord_1002');

    const done = async (id: string) =>
      waitFor(
        async () => {
          const op = await h.layer.ledger.get(TENANT, id);
          return op?.state === 'COMMITTED' ? op : undefined;
        },
        20_000,
        `${id} committed`,
      );
    const [a, b] = await Promise.all([done(first), done(second)]);

    // The first timed out and was reconciled; its request was never sent twice.
    expect((await h.layer.ledger.history(TENANT, first)).map((e) => e.state)).toContain('UNKNOWN');
    expect(a.attempt).toBe(1);
    expect(b.attempt).toBe(1);
    const report = await h.sandbox.concurrency();
    expect(report.tenants[TENANT]?.operations.refund?.max).toBe(1);
    const effects = await h.sandbox.effects({ tenant: TENANT });
    expect(effects.map((e) => e.reference).sort()).toEqual([first, second].sort());
    // The second began only after the first had left the provider (one clock: this machine's).
    const firstAt = effects.find((e) => e.reference === first)?.at;
    const firstDone = firstAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(firstAt);
    expect(b.startedAt ?? 0).toBeGreaterThanOrEqual(firstDone);
  });
});
