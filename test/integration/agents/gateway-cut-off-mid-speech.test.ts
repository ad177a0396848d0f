/**
 * Fault: gateway B (a process of its own, paused-gateway-process.ts) reaches Redis through a TCP
 * proxy; gateway A's janitor reaches it directly. While B speaks a result for longer than the
 * dead threshold, the proxy cuts B off from Redis (a partition, a failover B is slow to follow).
 * B is alive and its speech runs on, but its heartbeats and the hold of the result's stream
 * entry stop, so A's janitor takes the result over and sends it out of band. B must cut the
 * speech before the janitor can claim it, and must not say it again once Redis is back: the
 * caller gets it once, by message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { TcpProxy } from '../../../bench/chaos/tcp-proxy.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { startTs, waitFor, type StartedProcess } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

const TENANT = 'tenant-cut-off';
const B = 'gw-cut-off-b';
const HEARTBEAT_MS = 200;
const DEAD_AFTER_MS = 1_500;
/** B's response lasts this long: well past the dead threshold. */
const SPEECH_MS = 6_000;

interface EventOfB {
  readonly event: string;
  readonly operation?: string;
  readonly status?: string;
  readonly at: number;
}

let a: AgentsHarness;
let gatewayB: StartedProcess | undefined;
let proxy: TcpProxy | undefined;
const redis = testRedis();
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, maxConcurrent: 10 } } },
    gatewayId: 'gw-cut-off-harness',
  });
});
afterAll(async () => {
  if (gatewayB) {
    gatewayB.kill();
    await gatewayB.exited;
  }
  for (const close of closers.reverse()) await close();
  await proxy?.close();
  redis.disconnect();
  await a.close();
});

function eventsOfB(): EventOfB[] {
  return (gatewayB?.stdout() ?? '')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as EventOfB);
}

describe('when a live gateway is cut off from Redis while it speaks a result', () => {
  it(
    'should cut the speech before a janitor can take the result over, and leave it to the message',
    { timeout: 60_000 },
    async () => {
      const redisPort = Number(new URL(a.h.config.redis.url ?? '').port);
      const started = await TcpProxy.start(redisPort);
      proxy = started.proxy;
      gatewayB = startTs('test/integration/agents/paused-gateway-process.ts', {
        env: {
          CALLGATE_CONFIG: a.h.configPath,
          CALLGATE__redis__url: `redis://127.0.0.1:${started.port}`,
          GATEWAY_ID: B,
          SPEECH_MS: String(SPEECH_MS),
          CALLGATE__gateway__heartbeatMs: String(HEARTBEAT_MS),
          CALLGATE__gateway__deadAfterMs: String(DEAD_AFTER_MS),
          CALLGATE__rtp__stallCutMs: '500',
        },
      });
      await waitFor(
        async () => (eventsOfB().some((e) => e.event === 'ready') ? true : undefined),
        20_000,
        `gateway B ready\n${gatewayB.output()}`,
      );

      // Gateway A: a janitor on a direct connection; when it hands a result to the out-of-band queue is noted.
      const takenOverAt: number[] = [];
      const connection = testRedis();
      const deliveryA = new ResultDelivery({
        redis: connection,
        commands: redis,
        ledger: a.h.layer.ledger,
        gatewayId: 'gw-cut-off-a',
        tenants: [TENANT],
        catalogue: a.catalogue,
        outOfBand: {
          enqueue: async (message) => {
            takenOverAt.push(Date.now());
            return a.h.layer.outOfBand.enqueue(message);
          },
        },
        audit: a.audit,
        log: quietLog,
      });
      await deliveryA.start();
      const janitorA = new Janitor({
        redis,
        prefix: a.h.prefix,
        gatewayId: 'gw-cut-off-a',
        tenants: [TENANT],
        delivery: deliveryA,
        ledger: a.h.layer.ledger,
        heartbeatMs: HEARTBEAT_MS,
        deadAfterMs: DEAD_AFTER_MS,
        log: quietLog,
      });
      await janitorA.start();
      closers.push(async () => {
        await janitorA.stop();
        await deliveryA.stop();
        connection.disconnect();
      });

      const session = new AgentSession({
        sessionId: `${B}-speak`,
        tenantId: TENANT,
        caller: '+15550144',
        ownerGateway: B,
        agent: 'reservations',
      });
      const out = await a.runtime.handle(session, {
        callId: 'c-cut-off',
        name: 'book_table',
        arguments: {
          ...booking(),
          restaurant: 'bistro-nord',
          time: '19:30',
          party_size: 2,
          name: 'Ode',
        },
      });
      const operationId = String(out.operation_id);
      await waitFor(
        async () =>
          eventsOfB().some((e) => e.event === 'asked' && e.operation === operationId)
            ? true
            : undefined,
        10_000,
        'B speaking the result',
      );

      proxy.refuse(true);
      await waitFor(
        async () => (takenOverAt.length > 0 ? true : undefined),
        10 * DEAD_AFTER_MS,
        'the janitor taking the result over',
      );
      // B stays cut off past the end its speech would have had, then Redis is back for it.
      await new Promise((resolve) => setTimeout(resolve, SPEECH_MS));
      proxy.refuse(false);
      await new Promise((resolve) => setTimeout(resolve, 6 * HEARTBEAT_MS + 1_000));

      const ofB = eventsOfB().filter((e) => e.operation === operationId);
      expect(ofB.map((e) => `${e.event}:${e.status ?? ''}`)).toEqual([
        'asked:',
        'spoken:cancelled',
      ]);
      // Cut while B still held the result: before the janitor could claim it, not after.
      const cutAt = ofB[1]?.at ?? Number.POSITIVE_INFINITY;
      expect(cutAt).toBeLessThan(takenOverAt[0] ?? 0);
      expect(await messagesOnceSettled(a.h.sandbox.url, operationId, { settleMs: 500 })).toEqual([
        expect.objectContaining({ deliveries: 1 }),
      ]);
      expect((await a.h.layer.ledger.get(TENANT, operationId))?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        reasons: expect.arrayContaining(['gateway_gone']) as unknown,
      });
    },
  );
});
