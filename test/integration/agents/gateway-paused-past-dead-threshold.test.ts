/**
 * Fault: gateway B runs in a process of its own (paused-gateway-process.ts). While B is alive and
 * speaks a result for longer than the dead threshold, a janitor in gateway A takes nothing. Then
 * B, holding a second result while its caller talks, is paused (SIGSTOP) past the dead threshold:
 * A takes the result over and is still sending it out of band when B resumes (SIGCONT) and its
 * caller falls silent. B must not speak it: the caller gets one message and hears it never.
 * Real Redis, workers and sandbox; what B's conversation port was asked to say is B's output.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { Janitor } from '../../../agents/janitor.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { startTs, waitFor, type StartedProcess } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

const TENANT = 'tenant-paused';
const B = 'gw-paused-b';
const HEARTBEAT_MS = 200;
const DEAD_AFTER_MS = 1_000;
/** B's responses last this long: well past the dead threshold. */
const SPEECH_MS = 2_500;

let a: AgentsHarness;
let gatewayB: StartedProcess | undefined;
const redis = testRedis();
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, maxConcurrent: 10 } } },
    gatewayId: 'gw-paused-harness',
  });
});
afterAll(async () => {
  if (gatewayB) {
    gatewayB.child.kill('SIGCONT');
    gatewayB.kill();
    await gatewayB.exited;
  }
  for (const close of closers.reverse()) await close();
  redis.disconnect();
  await a.close();
});

/** What B printed, one event per line. */
function eventsOfB(): { event: string; session?: string; operation?: string }[] {
  return (gatewayB?.stdout() ?? '')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { event: string; session?: string; operation?: string });
}

async function book(sessionId: string, time: string): Promise<string> {
  // The session as admission sees it; B holds its own object for the same call.
  const session = new AgentSession({
    sessionId,
    tenantId: TENANT,
    caller: '+15550142',
    ownerGateway: B,
    agent: 'reservations',
  });
  const out = await a.runtime.handle(session, {
    callId: `c-${time}`,
    name: 'book_table',
    arguments: { ...booking(), restaurant: 'bistro-nord', time, party_size: 2, name: 'Lin' },
  });
  return String(out.operation_id);
}

describe('when a gateway process is paused past the dead threshold and resumes', () => {
  it(
    'should not have its live speech taken over, and should not speak what the janitor took while it was paused',
    { timeout: 60_000 },
    async () => {
      gatewayB = startTs('test/integration/agents/paused-gateway-process.ts', {
        env: {
          CALLGATE_CONFIG: a.h.configPath,
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

      // Gateway A's janitor, whose out-of-band sending the test holds back when it says so.
      let hold = false;
      let enqueued = 0;
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => (release = resolve));
      const connection = testRedis();
      const deliveryA = new ResultDelivery({
        redis: connection,
        commands: redis,
        ledger: a.h.layer.ledger,
        gatewayId: 'gw-paused-a',
        tenants: [TENANT],
        catalogue: a.catalogue,
        outOfBand: {
          enqueue: async (message) => {
            enqueued++;
            if (hold) await released;
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
        gatewayId: 'gw-paused-a',
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

      // B alive, speaking for 2.5 dead thresholds while A's rounds run: nothing taken.
      const spokenLive = await book(`${B}-speak`, '19:00');
      await waitFor(
        async () =>
          (await a.h.layer.ledger.get(TENANT, spokenLive))?.delivery?.decision === 'spoken'
            ? true
            : undefined,
        SPEECH_MS + 10_000,
        'the live speech recorded',
      );
      expect(enqueued).toBe(0);
      expect(await messages(a.h, spokenLive)).toEqual([]);

      // B holds a second result (its caller is talking), then is paused past the dead threshold.
      hold = true;
      const held = await book(`${B}-hold`, '20:00');
      await waitFor(
        async () =>
          (await a.h.layer.ledger.get(TENANT, held))?.delivery !== undefined ? true : undefined,
        10_000,
        'the gate decision at B',
      );
      gatewayB.child.kill('SIGSTOP');
      await waitFor(
        async () => (enqueued > 0 ? true : undefined),
        8 * DEAD_AFTER_MS,
        'the janitor taking the held result over',
      );
      gatewayB.child.kill('SIGCONT');
      // B heartbeats again, then its caller falls silent.
      await new Promise((resolve) => setTimeout(resolve, 3 * HEARTBEAT_MS));
      gatewayB.child.kill('SIGUSR1');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(
        eventsOfB()
          .filter((e) => e.event === 'asked')
          .map((e) => e.operation),
      ).toEqual([spokenLive]);

      release();
      expect(await messagesOnceSettled(a.h.sandbox.url, held, { settleMs: 500 })).toEqual([
        expect.objectContaining({ deliveries: 1 }),
      ]);
      expect((await a.h.layer.ledger.get(TENANT, held))?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
        reasons: expect.arrayContaining(['gateway_gone']) as unknown,
      });
      expect((await a.h.layer.ledger.get(TENANT, spokenLive))?.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        delivered: true,
      });
      expect(
        eventsOfB()
          .filter((e) => e.event === 'asked')
          .map((e) => e.operation),
      ).toEqual([spokenLive]);
      expect(await messages(a.h, spokenLive)).toEqual([]);
      await waitFor(
        async () => ((await redis.xlen(a.delivery.streamKey(TENANT, B))) === 0 ? true : undefined),
        3_000,
        "B's stream settled",
      );
    },
  );

  it(
    'should cut a result it was speaking when paused past the dead threshold: the caller gets it once, by message',
    { timeout: 60_000 },
    async () => {
      if (!gatewayB) throw new Error('gateway B is started by the test before');
      const midSpeech = await book(`${B}-speak`, '21:00');
      await waitFor(
        async () =>
          eventsOfB().some((e) => e.event === 'asked' && e.operation === midSpeech)
            ? true
            : undefined,
        10_000,
        'B speaking the third result',
      );
      gatewayB.child.kill('SIGSTOP');
      // Past the dead threshold: A's janitor takes the result over and sends it out of band.
      await waitFor(
        async () =>
          (await a.h.layer.ledger.get(TENANT, midSpeech))?.delivery?.decision ===
          'deliver_out_of_band'
            ? true
            : undefined,
        8 * DEAD_AFTER_MS,
        'the janitor taking the result over',
      );
      gatewayB.child.kill('SIGCONT');
      await waitFor(
        async () =>
          eventsOfB().some((e) => e.event === 'spoken' && e.operation === midSpeech)
            ? true
            : undefined,
        SPEECH_MS + 5_000,
        'B ending its speech',
      );
      await new Promise((resolve) => setTimeout(resolve, 1_000));

      // B cut it at once on resuming (nothing played on to its end) and never said it again.
      const ofB = eventsOfB().filter((e) => e.operation === midSpeech);
      expect(
        ofB.map((e) => `${e.event}:${String((e as { status?: string }).status ?? '')}`),
      ).toEqual(['asked:', 'spoken:cancelled']);
      expect(await messagesOnceSettled(a.h.sandbox.url, midSpeech, { settleMs: 500 })).toEqual([
        expect.objectContaining({ deliveries: 1 }),
      ]);
      expect((await a.h.layer.ledger.get(TENANT, midSpeech))?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        reasons: expect.arrayContaining(['gateway_gone']) as unknown,
      });
    },
  );
});
