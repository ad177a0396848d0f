import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { testRedis } from '../../support/redis.ts';
import { waitFor } from '../../support/processes.ts';

let a: AgentsHarness;
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { 'tenant-jan': { book_table: BOOK } },
    gatewayId: 'gw-live',
  });
});
afterAll(async () => a.close());

describe('when a gateway stops with results pending', () => {
  it('should have a janitor in a live gateway deliver each of its results out of band exactly once', async () => {
    const redis = testRedis();
    // A gateway that owned two calls heartbeated once, then died.
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now() - 5_000, 'gw-dead');
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const session = new AgentSession({
        sessionId: `dead-call-${i}`,
        tenantId: 'tenant-jan',
        caller: '+15550111',
        ownerGateway: 'gw-dead',
        agent: 'reservations',
      });
      const out = await a.runtime.handle(session, {
        callId: `c${i}`,
        name: 'book_table',
        arguments: {
          ...booking(),
          restaurant: 'bistro-nord',
          time: '19:00',
          party_size: 2,
          name: 'Lin',
        },
      });
      ids.push(String(out.operation_id));
    }
    for (const id of ids)
      await waitFor(
        async () =>
          (await a.h.layer.ledger.get('tenant-jan', id))?.state === 'COMMITTED' ? true : undefined,
        10_000,
        'commit',
      );
    // Two janitors race for the dead gateway's streams.
    const j1 = a.janitor('gw-live');
    const j2 = a.janitor('gw-other');
    const handled = (await Promise.all([j1.sweep(), j2.sweep()])).reduce((x, y) => x + y, 0);
    expect(handled).toBe(2);
    for (const id of ids) {
      await waitFor(
        async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
        10_000,
        'message',
      );
      expect((await a.h.layer.ledger.get('tenant-jan', id))?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        reasons: ['gateway_gone', 'committed'],
      });
    }
    // Later rounds find nothing new; messages stay one per operation.
    expect(await j1.sweep()).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const id of ids)
      expect(await messages(a.h, id)).toEqual([expect.objectContaining({ deliveries: 1 })]);
    redis.disconnect();
  });

  it('should leave the streams of a gateway that still heartbeats alone', async () => {
    const redis = testRedis();
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now(), 'gw-busy');
    const session = new AgentSession({
      sessionId: 'busy-call',
      tenantId: 'tenant-jan',
      ownerGateway: 'gw-busy',
      agent: 'reservations',
    });
    const out = await a.runtime.handle(session, {
      callId: 'cb',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'bistro-nord',
        time: '20:00',
        party_size: 2,
        name: 'Lin',
      },
    });
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get('tenant-jan', String(out.operation_id)))?.state === 'COMMITTED'
          ? true
          : undefined,
      10_000,
      'commit',
    );
    // It is still alive: its heartbeat is fresh when the janitor looks.
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now(), 'gw-busy');
    expect(await a.janitor('gw-live').sweep()).toBe(0);
    expect(await messages(a.h, String(out.operation_id))).toHaveLength(0);
    redis.disconnect();
  });
});

describe('when a gateway dies while it is speaking a result', () => {
  it('should leave the result pending in its stream, and the janitor should send it out of band once', async () => {
    const redis = testRedis();
    // A second gateway in this process; its call's port never finishes speaking (it dies mid-sentence).
    const dying = await startAgentsHarnessDelivery('gw-dying');
    const session = new AgentSession({
      sessionId: 'speaking-call',
      tenantId: 'tenant-jan',
      caller: '+15550122',
      ownerGateway: 'gw-dying',
      agent: 'reservations',
    });
    let speaking = false;
    dying.delivery.attach(session, {
      deliver: () => ((speaking = true), new Promise(() => undefined)),
    });
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now(), 'gw-dying');
    const out = await a.runtime.handle(session, {
      callId: 'cs',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'sushi-kaito',
        time: '19:00',
        party_size: 2,
        name: 'Lin',
      },
    });
    const id = String(out.operation_id);
    await waitFor(async () => (speaking ? true : undefined), 10_000, 'the result being spoken');
    await dying.stop();
    // Its heartbeat stops; a janitor elsewhere looks once its entry has been idle past the dead threshold (300 ms).
    await redis.zadd(`${a.h.prefix}:gateways`, Date.now() - 5_000, 'gw-dying');
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await a.janitor('gw-live').sweep()).toBeGreaterThanOrEqual(1);
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the out-of-band message',
    );
    expect((await a.h.layer.ledger.get('tenant-jan', id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      reasons: ['gateway_gone', 'committed'],
    });
    expect(await a.janitor('gw-live').sweep()).toBe(0);
    expect(await messages(a.h, id)).toEqual([expect.objectContaining({ deliveries: 1 })]);
    redis.disconnect();
  });
});

async function startAgentsHarnessDelivery(
  gatewayId: string,
): Promise<{ delivery: ResultDelivery; stop: () => Promise<void> }> {
  const connection = testRedis();
  const delivery = new ResultDelivery({
    redis: connection,
    ledger: a.h.layer.ledger,
    gatewayId,
    tenants: ['tenant-jan'],
    catalogue: a.catalogue,
    outOfBand: a.h.layer.outOfBand,
    audit: a.audit,
    log: quietLog,
  });
  await delivery.start();
  return {
    delivery,
    stop: async () => {
      await delivery.stop();
      connection.disconnect();
    },
  };
}
