/**
 * Fault: a gateway whose process clock runs behind (2 s, 30 s) speaks a result slowly (longer than
 * the dead threshold) while another gateway's janitor makes its rounds. Liveness is judged on
 * Redis's clock and a live gateway's entries never look idle, so the janitor takes nothing: the
 * caller hears the result once and gets no message. Real Redis, workers and sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import {
  ResultDelivery,
  type ConversationPort,
  type SpokenOutcome,
} from '../../../agents/result-delivery.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';

const TENANT = 'tenant-clock';
const HEARTBEAT_MS = 100;
const DEAD_AFTER_MS = 500;
/** The slow gateway's response runs well past the dead threshold. */
const SPEECH_MS = 3 * DEAD_AFTER_MS;

let a: AgentsHarness;
const redis = testRedis();
const stops: (() => Promise<void>)[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, maxConcurrent: 10 } } },
    gatewayId: 'gw-clock-harness',
  });
});
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  redis.disconnect();
  await a.close();
});

/** A port whose response takes SPEECH_MS and completes; what it was asked to say is kept. */
class SlowPort implements ConversationPort {
  readonly asked: string[] = [];
  async deliver(result: { operationId: string }): Promise<SpokenOutcome> {
    this.asked.push(result.operationId);
    await new Promise((resolve) => setTimeout(resolve, SPEECH_MS));
    return {
      status: 'completed',
      responseId: `resp_${this.asked.length}`,
      firstAudioAt: Date.now(),
    };
  }
}

/** A gateway's delivery and janitor (heartbeating) with its process clock `offsetMs` off. */
async function gateway(gatewayId: string, offsetMs: number): Promise<ResultDelivery> {
  const connection = testRedis();
  const now = (): number => Date.now() + offsetMs;
  const delivery = new ResultDelivery({
    redis: connection,
    commands: redis,
    ledger: a.h.layer.ledger,
    gatewayId,
    tenants: [TENANT],
    catalogue: a.catalogue,
    outOfBand: a.h.layer.outOfBand,
    audit: a.audit,
    log: quietLog,
    now,
  });
  await delivery.start();
  const janitor = new Janitor({
    redis,
    prefix: a.h.prefix,
    gatewayId,
    tenants: [TENANT],
    delivery,
    ledger: a.h.layer.ledger,
    heartbeatMs: HEARTBEAT_MS,
    deadAfterMs: DEAD_AFTER_MS,
    log: quietLog,
    now,
  });
  await janitor.start();
  stops.push(async () => {
    await janitor.stop();
    await delivery.stop();
    connection.disconnect();
  });
  return delivery;
}

describe('when a gateway whose clock runs behind speaks a result longer than the dead threshold', () => {
  it.each([2_000, 30_000])(
    'should be left alone by the janitors with its clock %i ms behind: spoken once, no message',
    async (behindMs) => {
      const slowId = `gw-behind-${behindMs}`;
      const delivery = await gateway(slowId, -behindMs);
      const judge = await gateway(`gw-judge-${behindMs}`, 0);
      expect(judge).toBeDefined();
      const session = new AgentSession({
        sessionId: `behind-call-${behindMs}`,
        tenantId: TENANT,
        caller: '+15550188',
        ownerGateway: slowId,
        agent: 'reservations',
      });
      const port = new SlowPort();
      delivery.attach(session, port);
      const out = await a.runtime.handle(session, {
        callId: `c-${behindMs}`,
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
        async () => (port.asked.length > 0 ? true : undefined),
        10_000,
        'the result being spoken',
      );
      // The judge's rounds run all through the speech (every heartbeat) and after it.
      await waitFor(
        async () =>
          (await a.h.layer.ledger.get(TENANT, id))?.delivery?.decision === 'spoken'
            ? true
            : undefined,
        SPEECH_MS + 5_000,
        'the spoken record',
      );
      await new Promise((resolve) => setTimeout(resolve, 2 * DEAD_AFTER_MS));

      expect(port.asked).toEqual([id]);
      expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        delivered: true,
      });
      expect(await messages(a.h, id)).toEqual([]);
      expect(await redis.xlen(delivery.streamKey(TENANT))).toBe(0);
    },
  );
});
