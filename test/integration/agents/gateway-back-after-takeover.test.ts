/**
 * Fault: gateway B, holding a result while its caller speaks, is cut off from Redis past the dead
 * threshold; a janitor takes the result over and is still sending it out of band when B comes
 * back and its caller falls silent. B no longer holds the stream entry (checked in Redis), so it
 * stays silent: the caller gets the message once and hears nothing. Real Redis behind a loopback
 * proxy that holds B's traffic, real workers and sandbox.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import type { OutOfBandQueue } from '../../../jobs/notify/out-of-band.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import {
  RecordingPort,
  startAgentsHarness,
  type AgentsHarness,
} from '../../support/agents-harness.ts';
import { CuttableProxy } from '../../support/cuttable-proxy.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis, testRedisUrl } from '../../support/redis.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

const TENANT = 'tenant-back';
const HEARTBEAT_MS = 200;
const DEAD_AFTER_MS = 1_000;

let a: AgentsHarness;
const redis = testRedis();
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    gatewayId: 'gw-back-harness',
  });
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  redis.disconnect();
  await a.close();
});

/** Gateway `gatewayId`: delivery and a heartbeating janitor, on `url`, sending out of band through `outOfBand`. */
async function gateway(
  gatewayId: string,
  url: string,
  outOfBand: Pick<OutOfBandQueue, 'enqueue'>,
): Promise<ResultDelivery> {
  const blocking = new Redis(url, { maxRetriesPerRequest: null });
  const shared = new Redis(url, { maxRetriesPerRequest: null });
  const delivery = new ResultDelivery({
    redis: blocking,
    commands: shared,
    ledger: a.h.layer.ledger,
    gatewayId,
    tenants: [TENANT],
    catalogue: a.catalogue,
    outOfBand,
    audit: a.audit,
    log: quietLog,
  });
  await delivery.start();
  const janitor = new Janitor({
    redis: shared,
    prefix: a.h.prefix,
    gatewayId,
    tenants: [TENANT],
    delivery,
    ledger: a.h.layer.ledger,
    heartbeatMs: HEARTBEAT_MS,
    deadAfterMs: DEAD_AFTER_MS,
    log: quietLog,
  });
  await janitor.start();
  closers.push(async () => {
    await janitor.stop();
    await delivery.stop();
    blocking.disconnect();
    shared.disconnect();
  });
  return delivery;
}

describe('when a gateway comes back after a janitor took over the result it held', () => {
  it('should stay silent about it, and the caller should get the message once', async () => {
    const target = new URL(testRedisUrl());
    const proxy = await CuttableProxy.start({ host: target.hostname, port: Number(target.port) });
    closers.push(() => proxy.close());
    const b = await gateway('gw-back-b', proxy.redisUrl(testRedisUrl()), a.h.layer.outOfBand);
    // The janitor's message goes out only when the test lets it: B comes back meanwhile.
    let enqueued = false;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    await gateway('gw-back-a', testRedisUrl(), {
      enqueue: async (message) => {
        enqueued = true;
        await released;
        return a.h.layer.outOfBand.enqueue(message);
      },
    });

    const session = new AgentSession({
      sessionId: 'back-call',
      tenantId: TENANT,
      caller: '+15550166',
      ownerGateway: 'gw-back-b',
      agent: 'reservations',
    });
    session.callerSpeaking = true;
    const port = new RecordingPort();
    b.attach(session, port);
    const out = await a.runtime.handle(session, {
      callId: 'c-back',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'bistro-nord',
        time: '19:00',
        party_size: 2,
        name: 'Lin',
      },
    });
    const id = String(out.operation_id);
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, id))?.delivery !== undefined ? true : undefined,
      10_000,
      'the gate decision at B',
    );

    proxy.cut();
    await waitFor(
      async () => (enqueued ? true : undefined),
      6 * DEAD_AFTER_MS,
      'the janitor taking the result over',
    );
    proxy.heal();
    // B is back: heartbeats, then its caller falls silent.
    await new Promise((resolve) => setTimeout(resolve, 2 * HEARTBEAT_MS));
    session.callerSpeaking = false;
    await b.onIdle(session.sessionId);
    expect(port.spoken).toEqual([]);

    release();
    expect(await messagesOnceSettled(a.h.sandbox.url, id, { settleMs: 500 })).toEqual([
      expect.objectContaining({ deliveries: 1 }),
    ]);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      channel: 'out_of_band',
      reasons: expect.arrayContaining(['gateway_gone']) as unknown,
    });
    await b.onIdle(session.sessionId);
    expect(port.spoken).toEqual([]);
    await waitFor(
      async () => ((await redis.xlen(b.streamKey(TENANT))) === 0 ? true : undefined),
      2_000,
      'the entry settled by the janitor',
    );
  });
});
