/**
 * Class: the start of an attempt not durable before the request leaves. A Redis primary with one
 * replica; the replica falls behind (paused) while a refund starts, and then the primary is lost
 * and the replica promoted: whatever the primary had not passed on is gone. With
 * redis.durability `replica`, a refund whose sending mark did not reach the replica is not sent
 * (the new primary has it ADMITTED and sends it once); with `none`, the same loss rolls the sent
 * refund back to ADMITTED and it is sent a second time. Real worker processes, real redis-servers,
 * the sandbox over HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { BOOK, REFUND, booking, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor, type StartedProcess } from '../../support/processes.ts';
import { startRedisPair, type RedisPair } from '../../support/redis-pair.ts';
import { startWorkerProcess, stopWorkerProcess } from '../../support/worker-process.ts';
import { OperationLedger } from '../../../jobs/ledger/operation-ledger.ts';
import { Redis } from 'ioredis';

const TENANT = 'tenant-failover';

let pair: RedisPair | undefined;
let h: Harness | undefined;
const workers: StartedProcess[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await stopWorkerProcess(w, 2_000);
  await h?.close().catch(() => undefined);
  await pair?.stop();
  h = undefined;
  pair = undefined;
});

/** A refund (no idempotency keys at the payments service) or a booking (keyed) started across the failover. */
const ACTIONS = {
  refund: { config: REFUND, args: { order_id: 'ord_1040', amount_cents: 1_100 } },
  book_table: { config: BOOK, args: booking({ time: '19:30' }) },
};

async function acrossFailover(
  durability: 'none' | 'replica',
  action: keyof typeof ACTIONS = 'refund',
): Promise<{ requests: number; effects: number; state: string | undefined }> {
  pair = await startRedisPair();
  const harness = (h = await startHarness({
    // Worker processes start within seconds on a loaded machine: the operation waits for one.
    tenants: {
      [TENANT]: {
        [action]: { ...ACTIONS[action].config, admissionDeadlineMs: 60_000, deadlineMs: 120_000 },
      },
    },
    workers: false,
    redisUrl: pair.primary.url,
    redis: { durability: { mode: durability, replicas: 1, timeoutMs: 300 } },
  }));
  // The refund is admitted (and its job enqueued) while the replica keeps up with the primary.
  const decision = await harness.layer.admit({
    tenantId: TENANT,
    action,
    args: ACTIONS[action].args,
    scope: harness.scope(),
  });
  if (decision.type !== 'started') throw new Error(decision.type);
  const id = decision.operationId;
  const replicaView = new Redis(pair.replica.url, { maxRetriesPerRequest: null });
  const replicaLedger = new OperationLedger(replicaView, {
    prefix: harness.prefix,
    retentionDays: 30,
    moneyRetentionDays: 400,
  });
  await waitFor(
    async () => ((await replicaLedger.get(TENANT, id))?.state === 'ADMITTED' ? true : undefined),
    10_000,
    'the admission on the replica',
  );
  // Then the replica falls behind, and a worker starts the refund.
  pair.pauseReplica();
  workers.push(await startWorkerProcess(harness));
  await waitFor(
    async () =>
      (await harness.layer.ledger.history(TENANT, id)).some((e) => e.state === 'RUNNING')
        ? true
        : undefined,
    10_000,
    'the refund to start',
  );
  // Long enough for a send that went ahead to reach the sandbox, and for a WAIT to give up.
  await new Promise((resolve) => setTimeout(resolve, 800));

  // The primary is lost before the replica caught up; the replica takes over.
  await pair.failover();
  for (const w of workers.splice(0)) await stopWorkerProcess(w, 2_000);
  // The promoted node has no replica of its own: the operator runs it without one for now.
  workers.push(
    await startWorkerProcess(harness, {
      redisUrl: pair.replica.url,
      env: { CALLGATE__redis__durability: '{"mode":"none"}' },
    }),
  );
  try {
    const op = await waitFor(
      async () => {
        const current = await replicaLedger.get(TENANT, id);
        return current?.state === 'COMMITTED' || current?.state === 'FAILED_FINAL'
          ? current
          : undefined;
      },
      20_000,
      'the refund to finish on the promoted replica',
    ).catch(async (error: unknown) => {
      throw new Error(
        `${String(error)}; on the replica: ${JSON.stringify(await replicaLedger.get(TENANT, id))}\n${workers[0]?.output().slice(-3_000) ?? ''}`,
      );
    });
    return {
      requests: (await harness.sandbox.counts()).requests[id] ?? 0,
      effects: (await harness.sandbox.effects({ reference: id })).length,
      state: op.state,
    };
  } finally {
    replicaView.disconnect();
  }
}

describe('when the primary is lost before its replica has the sending mark', () => {
  it(
    'should not send the refund until the mark is on the replica: one refund after the failover',
    { timeout: 90_000 },
    async () => {
      const outcome = await acrossFailover('replica');
      expect(outcome).toEqual({ requests: 1, effects: 1, state: 'COMMITTED' });
    },
  );

  it(
    'should not send a keyed booking before its mark is on the replica either: one request',
    { timeout: 90_000 },
    async () => {
      // Sent before the loss, a booking rolled back to ADMITTED is sent again (the key saves the
      // effect) or, once past its deadline, cancelled as never sent though it took effect.
      const outcome = await acrossFailover('replica', 'book_table');
      expect(outcome).toEqual({ requests: 1, effects: 1, state: 'COMMITTED' });
    },
  );

  it(
    'should show why: without durability the refund rolled back to ADMITTED is sent twice',
    { timeout: 90_000 },
    async () => {
      const outcome = await acrossFailover('none');
      expect(outcome.effects).toBe(2);
    },
  );
});
