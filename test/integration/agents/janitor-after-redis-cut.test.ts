/**
 * Fault: both gateways are cut off from Redis for longer than the dead threshold while gateway B
 * holds a result (its caller is speaking); the cut heals for gateway A first and for B a little
 * later, as reconnections do. A's janitor must not judge B on the heartbeats the cut made old, and
 * B's entry must not look idle once B is back: B tells its caller once, no message is sent. Real
 * Redis behind a loopback proxy that holds the traffic, real workers and sandbox.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import {
  messages,
  RecordingPort,
  startAgentsHarness,
  type AgentsHarness,
} from '../../support/agents-harness.ts';
import { CuttableProxy } from '../../support/cuttable-proxy.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis, testRedisUrl } from '../../support/redis.ts';

const TENANT = 'tenant-cut';
const HEARTBEAT_MS = 200;
const DEAD_AFTER_MS = 1_000;
/** Longer than the dead threshold: every heartbeat in the registry is older than it when the cut heals. */
const CUT_MS = 1_600;
/** B reconnects this long after A. */
const B_LATER_MS = 400;

let a: AgentsHarness;
const redis = testRedis();
const proxies: CuttableProxy[] = [];
const stops: (() => Promise<void>)[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    gatewayId: 'gw-cut-harness',
  });
});
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  for (const proxy of proxies) await proxy.close();
  redis.disconnect();
  await a.close();
});

/** A gateway's delivery and heartbeating janitor, all its Redis connections through its own proxy. */
async function gateway(
  gatewayId: string,
): Promise<{ delivery: ResultDelivery; proxy: CuttableProxy }> {
  const url = new URL(testRedisUrl());
  const proxy = await CuttableProxy.start({ host: url.hostname, port: Number(url.port) });
  proxies.push(proxy);
  const blocking = new Redis(proxy.redisUrl(testRedisUrl()), { maxRetriesPerRequest: null });
  const shared = new Redis(proxy.redisUrl(testRedisUrl()), { maxRetriesPerRequest: null });
  const delivery = new ResultDelivery({
    redis: blocking,
    commands: shared,
    ledger: a.h.layer.ledger,
    gatewayId,
    tenants: [TENANT],
    catalogue: a.catalogue,
    outOfBand: a.h.layer.outOfBand,
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
  stops.push(async () => {
    await janitor.stop();
    await delivery.stop();
    blocking.disconnect();
    shared.disconnect();
  });
  return { delivery, proxy };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('when two gateways are cut off from Redis past the dead threshold and come back one after the other', () => {
  it('should leave the result with the gateway that holds it: told once when its caller is idle, no message', async () => {
    const gwA = await gateway('gw-cut-a');
    const gwB = await gateway('gw-cut-b');
    const session = new AgentSession({
      sessionId: 'cut-call',
      tenantId: TENANT,
      caller: '+15550199',
      ownerGateway: 'gw-cut-b',
      agent: 'reservations',
    });
    session.callerSpeaking = true;
    const port = new RecordingPort();
    gwB.delivery.attach(session, port);
    const out = await a.runtime.handle(session, {
      callId: 'c-cut',
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
    // B holds the result until its caller stops talking.
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, id))?.delivery !== undefined ? true : undefined,
      10_000,
      'the gate decision at B',
    );
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({ delivered: false });
    // A has watched long enough to judge, and finds B alive.
    await sleep(DEAD_AFTER_MS + 2 * HEARTBEAT_MS);

    gwA.proxy.cut();
    gwB.proxy.cut();
    await sleep(CUT_MS);
    gwA.proxy.heal();
    await sleep(B_LATER_MS);
    gwB.proxy.heal();
    // A's rounds go on past a full dead threshold after the cut healed.
    await sleep(DEAD_AFTER_MS + 4 * HEARTBEAT_MS);
    expect(await messages(a.h, id)).toEqual([]);

    session.callerSpeaking = false;
    await gwB.delivery.onIdle(session.sessionId);
    expect(port.completed(id)).toHaveLength(1);
    expect(port.spoken.filter((s) => s.operationId === id)).toHaveLength(1);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'spoken',
      channel: 'voice',
      delivered: true,
    });
    await waitFor(
      async () => ((await redis.xlen(gwB.delivery.streamKey(TENANT))) === 0 ? true : undefined),
      2_000,
      'the entry settled',
    );
    expect(await messages(a.h, id)).toEqual([]);
  });
});
