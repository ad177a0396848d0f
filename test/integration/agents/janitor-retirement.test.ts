import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import type { OutOfBandQueue } from '../../../jobs/notify/out-of-band.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import {
  messages,
  RecordingPort,
  startAgentsHarness,
  type AgentsHarness,
} from '../../support/agents-harness.ts';
import { testRedis } from '../../support/redis.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-retire';
/** Past the janitor's watch window of a dead gateway (24 h). */
const DAY_AND_AN_HOUR_MS = 25 * 3_600_000;
const DEAD_AFTER_MS = 300;

let a: AgentsHarness;
const redis = testRedis();
const janitors: Janitor[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, maxConcurrent: 10 } } },
    gatewayId: 'gw-retire-live',
  });
});
afterAll(async () => {
  for (const j of janitors) await j.stop();
  redis.disconnect();
  await a.close();
});

const registryKey = (): string => `${a.h.prefix}:gateways`;
const table = (time: string) => ({
  ...booking(),
  restaurant: 'bistro-nord',
  time,
  party_size: 2,
  name: 'Lin',
});

/** A janitor in a live gateway (its rounds judge on Redis's clock: the watch window is reached by aging heartbeats). */
function janitor(
  gatewayId: string,
  options: { outOfBand?: Pick<OutOfBandQueue, 'enqueue'> } = {},
): Janitor {
  const delivery = new ResultDelivery({
    redis,
    ledger: a.h.layer.ledger,
    gatewayId,
    tenants: [TENANT],
    catalogue: a.catalogue,
    outOfBand: options.outOfBand ?? a.h.layer.outOfBand,
    audit: a.audit,
    log: quietLog,
  });
  const j = new Janitor({
    redis,
    prefix: a.h.prefix,
    gatewayId,
    tenants: [TENANT],
    delivery,
    ledger: a.h.layer.ledger,
    heartbeatMs: 100,
    deadAfterMs: DEAD_AFTER_MS,
    log: quietLog,
  });
  janitors.push(j);
  return j;
}

/** Books a table for a call owned by `gateway` (no delivery runs there) and waits for the commit. */
async function bookOwnedBy(gateway: string, time: string): Promise<string> {
  const session = new AgentSession({
    sessionId: `${gateway}-call-${time.replace(':', '')}`,
    tenantId: TENANT,
    caller: '+15550144',
    ownerGateway: gateway,
    agent: 'reservations',
  });
  const out = await a.runtime.handle(session, {
    callId: `c-${time}`,
    name: 'book_table',
    arguments: table(time),
  });
  if (out.status !== 'started') throw new Error(`booking not started: ${JSON.stringify(out)}`);
  const id = String(out.operation_id);
  await waitFor(
    async () =>
      (await a.h.layer.ledger.get(TENANT, id))?.state === 'COMMITTED' ? true : undefined,
    10_000,
    `commit of ${id}`,
  );
  return id;
}

describe('when a gateway shuts down cleanly', () => {
  it('should be taken over at once, and leave the registry with its streams when the watch window ends', async () => {
    const leaving = janitor('gw-leaving');
    await leaving.start();
    await leaving.stop();
    const id = await bookOwnedBy('gw-leaving', '20:30');
    await leaving.resign();
    const score = Number(await redis.zscore(registryKey(), 'gw-leaving'));
    expect(score).toBeGreaterThan(0);
    expect(score).toBeLessThan(Date.now() - DEAD_AFTER_MS);

    // Janitors take over at once: its result goes out of band, once.
    expect(await janitor('gw-retire-live').sweep()).toBe(1);
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the out-of-band message',
    );
    const key = a.delivery.streamKey(TENANT, 'gw-leaving');
    // Watched for results of operations still running until the window ends.
    expect(await redis.zscore(registryKey(), 'gw-leaving')).not.toBeNull();
    expect(await redis.exists(key)).toBe(1);

    // The window ends: it resigned a day and an hour ago.
    await redis.zadd(registryKey(), score - DAY_AND_AN_HOUR_MS, 'gw-leaving');
    expect(await janitor('gw-retire-live').sweep()).toBe(0);
    expect(await redis.zscore(registryKey(), 'gw-leaving')).toBeNull();
    expect(await redis.exists(key, `${a.h.prefix}:janitor:gw-leaving`)).toBe(0);
    expect(await messages(a.h, id)).toEqual([expect.objectContaining({ deliveries: 1 })]);
  });

  it('should retire a gateway that resigned with score 0 (before this fix) without making streams for it', async () => {
    await redis.zadd(registryKey(), 0, 'gw-resigned-long-ago');
    await janitor('gw-retire-live').sweep();
    expect(await redis.zscore(registryKey(), 'gw-resigned-long-ago')).toBeNull();
    expect(
      await redis.exists(
        a.delivery.streamKey(TENANT, 'gw-resigned-long-ago'),
        `${a.h.prefix}:janitor:gw-resigned-long-ago`,
      ),
    ).toBe(0);
  });
});

describe('when the watch window of a dead gateway ends with a result not yet delivered', () => {
  it('should keep the stream and the registry entry until the result went out, then retire them', async () => {
    const id = await bookOwnedBy('gw-owing', '19:30');
    await redis.zadd(registryKey(), Date.now() - DAY_AND_AN_HOUR_MS, 'gw-owing');
    const key = a.delivery.streamKey(TENANT, 'gw-owing');
    // The out-of-band channel is down during the first round.
    const down = janitor('gw-retire-down', {
      outOfBand: { enqueue: () => Promise.reject(new Error('queue down')) },
    });
    await expect(down.sweep()).rejects.toThrow('queue down');
    expect(await redis.xlen(key)).toBe(1);
    expect(await redis.zscore(registryKey(), 'gw-owing')).not.toBeNull();
    await redis.del(`${a.h.prefix}:janitor:gw-owing`);
    // What the failed round claimed is claimed again once idle past the dead threshold.
    await new Promise((resolve) => setTimeout(resolve, DEAD_AFTER_MS + 50));

    expect(await janitor('gw-retire-live').sweep()).toBe(1);
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the out-of-band message',
    );
    expect(await redis.exists(key)).toBe(0);
    expect(await redis.zscore(registryKey(), 'gw-owing')).toBeNull();
    expect(await messages(a.h, id)).toEqual([expect.objectContaining({ deliveries: 1 })]);
  });

  it('should retire a stream whose entries were all acknowledged but not deleted (written before this fix)', async () => {
    const key = a.delivery.streamKey(TENANT, 'gw-old-acked');
    await redis.xgroup('CREATE', key, 'delivery', '0', 'MKSTREAM');
    await redis.xadd(
      key,
      '*',
      'event_id',
      'ev_old',
      'operation_id',
      'op_gone',
      'tenant_id',
      TENANT,
      'session_id',
      's',
      'state',
      'COMMITTED',
      'attempt',
      '1',
      'at',
      '1',
    );
    const read = (await redis.xreadgroup(
      'GROUP',
      'delivery',
      'gw-old-acked',
      'STREAMS',
      key,
      '>',
    )) as [string, [string, string[]][]][];
    await redis.xack(key, 'delivery', read[0]?.[1][0]?.[0] ?? '');
    await redis.zadd(registryKey(), Date.now() - DAY_AND_AN_HOUR_MS, 'gw-old-acked');
    expect(await janitor('gw-retire-live').sweep()).toBe(0);
    expect(await redis.exists(key)).toBe(0);
    expect(await redis.zscore(registryKey(), 'gw-old-acked')).toBeNull();
  });
});

describe('when a gateway with a fixed id comes back after its streams were retired', () => {
  it('should make its delivery group again and speak the result of its call', async () => {
    const connection = testRedis();
    const back = new ResultDelivery({
      redis: connection,
      ledger: a.h.layer.ledger,
      gatewayId: 'gw-back',
      tenants: [TENANT],
      catalogue: a.catalogue,
      outOfBand: a.h.layer.outOfBand,
      audit: a.audit,
      log: quietLog,
    });
    await back.start();
    // A janitor retired the stream (and its group) just as the gateway started.
    await redis.del(back.streamKey(TENANT));
    const session = new AgentSession({
      sessionId: 'back-call',
      tenantId: TENANT,
      caller: '+15550155',
      ownerGateway: 'gw-back',
      agent: 'reservations',
    });
    const port = new RecordingPort();
    back.attach(session, port);
    const out = await a.runtime.handle(session, {
      callId: 'cb',
      name: 'book_table',
      arguments: table('21:00'),
    });
    const id = String(out.operation_id);
    await waitFor(
      async () => (port.completed(id).length === 1 ? true : undefined),
      10_000,
      'the result spoken',
    );
    await waitFor(
      async () => ((await redis.xlen(back.streamKey(TENANT))) === 0 ? true : undefined),
      5_000,
      'the stream to be empty',
    );
    await back.stop();
    connection.disconnect();
  });
});
