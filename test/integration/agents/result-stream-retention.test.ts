import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { testRedis } from '../../support/redis.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-streams';

let a: AgentsHarness;
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, maxConcurrent: 10 } } },
    gatewayId: 'gw-streams',
  });
});
afterAll(async () => a.close());

const table = (time: string) => ({
  ...booking(),
  restaurant: 'bistro-nord',
  time,
  party_size: 2,
  name: 'Lin',
});

async function committed(id: string): Promise<void> {
  await waitFor(
    async () =>
      (await a.h.layer.ledger.get(TENANT, id))?.state === 'COMMITTED' ? true : undefined,
    10_000,
    `commit of ${id}`,
  );
}

describe('when a gateway has delivered its results', () => {
  it('should leave nothing in its result stream: each entry goes once acknowledged', async () => {
    const redis = testRedis();
    const key = a.delivery.streamKey(TENANT);
    const calls = [0, 1, 2].map(() => a.call(TENANT));
    const ids: string[] = [];
    for (const [i, { session }] of calls.entries()) {
      const out = await a.runtime.handle(session, {
        callId: `c${i}`,
        name: 'book_table',
        arguments: table(`19:0${i}`),
      });
      ids.push(String(out.operation_id));
    }
    for (const [i, id] of ids.entries()) {
      await waitFor(
        async () => (calls[i]?.port.completed(id).length === 1 ? true : undefined),
        10_000,
        `the result of ${id} spoken`,
      );
    }
    await waitFor(
      async () => ((await redis.xlen(key)) === 0 ? true : undefined),
      5_000,
      'the stream to be empty',
    );
    expect(await redis.xpending(key, 'delivery')).toEqual([0, null, null, null]);
    for (const [i, id] of ids.entries()) expect(calls[i]?.port.completed(id)).toHaveLength(1);
    redis.disconnect();
  });
});

describe('when the owning gateway dies while it is speaking a result', () => {
  it('should keep the unacknowledged entry in the stream until a janitor elsewhere delivered it once', async () => {
    const redis = testRedis();
    const connection = testRedis();
    const dying = new ResultDelivery({
      redis: connection,
      ledger: a.h.layer.ledger,
      gatewayId: 'gw-stream-dies',
      tenants: [TENANT],
      catalogue: a.catalogue,
      outOfBand: a.h.layer.outOfBand,
      audit: a.audit,
      log: quietLog,
    });
    await dying.start();
    const session = new AgentSession({
      sessionId: 'stream-dies-call',
      tenantId: TENANT,
      caller: '+15550133',
      ownerGateway: 'gw-stream-dies',
      agent: 'reservations',
    });
    let speaking = false;
    dying.attach(session, { deliver: () => ((speaking = true), new Promise(() => undefined)) });
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now(), 'gw-stream-dies');
    const out = await a.runtime.handle(session, {
      callId: 'cd',
      name: 'book_table',
      arguments: table('20:00'),
    });
    const id = String(out.operation_id);
    await committed(id);
    await waitFor(async () => (speaking ? true : undefined), 10_000, 'the result being spoken');
    await dying.stop();
    connection.disconnect();

    // Read, never acknowledged: still in the stream, pending.
    const key = dying.streamKey(TENANT);
    expect(await redis.xlen(key)).toBe(1);
    expect((await redis.xpending(key, 'delivery'))[0]).toBe(1);

    await redis.zadd(`${a.h.prefix}:gateways`, Date.now() - 5_000, 'gw-stream-dies');
    expect(await a.janitor('gw-streams').sweep()).toBe(1);
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the out-of-band message',
    );
    expect(await redis.xlen(key)).toBe(0);
    expect(await a.janitor('gw-streams').sweep()).toBe(0);
    expect(await messages(a.h, id)).toEqual([expect.objectContaining({ deliveries: 1 })]);
    redis.disconnect();
  });
});
