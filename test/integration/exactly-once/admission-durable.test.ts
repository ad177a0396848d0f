/**
 * Class: an admission not durable before the caller is told it started. A Redis primary with one
 * replica that falls behind (paused); then the primary is lost and the replica promoted. With
 * redis.durability `replica`, a refund whose admission did not reach the replica is taken back and
 * answered busy (nothing admitted, the key free), and the same request once the replica keeps up
 * is admitted and survives the failover. With `none`, the refund answered "started" is gone from
 * the promoted replica: the caller was told of an operation no ledger has. Real redis-servers.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { OperationLedger } from '../../../jobs/ledger/operation-ledger.ts';
import { REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { startRedisPair, type RedisPair } from '../../support/redis-pair.ts';

const TENANT = 'tenant-admission-durable';
const REQUEST = {
  tenantId: TENANT,
  action: 'refund',
  args: { order_id: 'ord_1041', amount_cents: 1_200 },
};

let pair: RedisPair | undefined;
let h: Harness | undefined;
const closers: (() => void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await h?.close().catch(() => undefined);
  await pair?.stop();
  h = undefined;
  pair = undefined;
});

async function setUp(
  durability: 'none' | 'replica',
): Promise<{ harness: Harness; replicaLedger: OperationLedger }> {
  pair = await startRedisPair();
  const harness = (h = await startHarness({
    tenants: {
      [TENANT]: { refund: { ...REFUND, admissionDeadlineMs: 60_000, deadlineMs: 120_000 } },
    },
    workers: false,
    redisUrl: pair.primary.url,
    redis: { durability: { mode: durability, replicas: 1, timeoutMs: 300 } },
  }));
  const replicaView = new Redis(pair.replica.url, { maxRetriesPerRequest: null });
  closers.push(() => replicaView.disconnect());
  const replicaLedger = new OperationLedger(replicaView, {
    prefix: harness.prefix,
    retentionDays: 30,
    moneyRetentionDays: 400,
  });
  return { harness, replicaLedger };
}

describe('when the replica falls behind while a refund is admitted, and the primary is then lost', () => {
  it(
    'should answer busy and keep nothing, then admit the same request once it can be made durable',
    { timeout: 60_000 },
    async () => {
      const { harness, replicaLedger } = await setUp('replica');
      const scope = harness.scope();
      pair?.pauseReplica();
      const refused = await harness.layer.admit({ ...REQUEST, scope });
      expect(refused).toMatchObject({ type: 'busy', reason: 'not_durable' });
      // Nothing of it is left on the primary: no open operation, the idempotency key free.
      expect(await harness.layer.ledger.listOpen(TENANT, Number.POSITIVE_INFINITY, 10)).toEqual([]);

      pair?.resumeReplica();
      const admitted = await harness.layer.admit({ ...REQUEST, scope });
      if (admitted.type !== 'started') throw new Error(`expected started, got ${admitted.type}`);
      await pair?.failover();
      expect(await replicaLedger.get(TENANT, admitted.operationId)).toMatchObject({
        state: 'ADMITTED',
        operationId: admitted.operationId,
      });
      expect((await harness.sandbox.counts()).requests[admitted.operationId] ?? 0).toBe(0);
    },
  );

  it(
    'should show why: without durability the refund told "started" is gone after the failover',
    { timeout: 60_000 },
    async () => {
      const { harness, replicaLedger } = await setUp('none');
      pair?.pauseReplica();
      const admitted = await harness.layer.admit({ ...REQUEST, scope: harness.scope() });
      if (admitted.type !== 'started') throw new Error(`expected started, got ${admitted.type}`);
      await pair?.failover();
      await waitFor(
        async () =>
          (await replicaLedger.listOpen(TENANT, Number.POSITIVE_INFINITY, 10)) !== undefined
            ? true
            : undefined,
        5_000,
        'the promoted replica',
      );
      expect(await replicaLedger.get(TENANT, admitted.operationId)).toBeUndefined();
    },
  );
});
