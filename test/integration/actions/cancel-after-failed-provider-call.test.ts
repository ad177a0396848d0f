/**
 * A cancel that the provider did not take the first time is not lost: the provider call is retried
 * with backoff, and a cancel job that gave up is replaced by the next request instead of swallowing
 * it. Real Redis, real BullMQ workers, the real sandbox over HTTP.
 */
import { UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bullPrefix,
  CANCEL_QUEUE,
  OperationQueues,
  type OperationJobData,
} from '../../../jobs/queues/operation-queues.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { deletePrefix, testRedis } from '../../support/redis.ts';

const TENANT = 'tenant-cancel-retry';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tenants: { [TENANT]: { book_table: { ...BOOK } } } });
});
afterAll(async () => h.close());

describe("when the provider's first answer to a cancel is a 503", () => {
  it('should ask again, and the booking should end CANCELLED with no effect at the provider', async () => {
    await h.sandbox.addRule({ fault: 'latency=4000,cancel=on', tenant: TENANT, operation: 'book' });
    await h.sandbox.addRule({
      fault: 'error=503',
      tenant: TENANT,
      operation: 'cancel',
      nth: 1,
      times: 1,
    });
    const decision = await h.layer.admit({
      tenantId: TENANT,
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
    const id = decision.operationId;
    await waitFor(
      async () => ((await h.layer.ledger.get(TENANT, id))?.sending ? true : undefined),
      5_000,
      'the booking request to be sent',
    );

    expect(await h.layer.cancel(TENANT, id)).toEqual({ type: 'requested', operationId: id });
    const op = await h.layer.waitFor(TENANT, id, 10_000);
    expect(op?.state).toBe('CANCELLED');
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(0);
    // The provider saw two cancel requests: the one that failed and the retry that took effect.
    const rules = await fetch(`${h.sandbox.url}/admin/faults`).then(
      (r) =>
        r.json() as Promise<{
          rules: { operation?: string; tenant?: string; seen: number; applied: number }[];
        }>,
    );
    expect(rules.rules.find((r) => r.operation === 'cancel' && r.tenant === TENANT)).toMatchObject({
      seen: 2,
      applied: 1,
    });
  });
});

describe('when a cancel job gave up and the cancel is requested again', () => {
  it('should replace the failed job, so the new request really runs', async () => {
    const operationId = `op_gaveup${Date.now()}`;
    const connection = testRedis();
    const runs: number[] = [];
    // A cancel worker of the test's own on a queue no harness worker reads, whose first run gives
    // up for good the way a cancel job does after its last try.
    const prefix = `${h.prefix}-own`;
    const queues = new OperationQueues(connection, prefix);
    const worker = new Worker<OperationJobData>(
      CANCEL_QUEUE,
      async () => {
        runs.push(Date.now());
        if (runs.length === 1)
          throw new UnrecoverableError('the provider cancel call failed on every try');
        return 'cancelled';
      },
      { connection, prefix: bullPrefix(prefix) },
    );
    try {
      await queues.enqueueCancel({ operationId, tenantId: TENANT });
      await waitFor(
        async () =>
          (await queues.queue(CANCEL_QUEUE).getJob(`cx-${operationId}`))?.failedReason
            ? true
            : undefined,
        5_000,
        'the cancel job to fail',
      );
      await queues.enqueueCancel({ operationId, tenantId: TENANT });
      await waitFor(
        async () => (runs.length === 2 ? true : undefined),
        5_000,
        'the second cancel request to run',
      );
      expect(runs).toHaveLength(2);
    } finally {
      await worker.close();
      await queues.close();
      await deletePrefix(connection, `{${prefix}-bull}`);
      connection.disconnect();
    }
  });
});
