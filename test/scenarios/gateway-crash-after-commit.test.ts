/**
 * Race: the booking has COMMITTED and the gate has decided to tell the caller when the agent stops
 * talking, but the gateway process holding the call is killed (SIGKILL) before the acknowledgement
 * is spoken. The caller never heard it, so it is not counted as told: the result event stays
 * unacknowledged in the dead gateway's stream, and the replacement's janitor delivers it out of
 * band, exactly once. One booking at the system of record.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { expectDeliveredOutOfBandOnce, gatewayCrashScenario } from './gateway-crash.ts';

const SCRIPT = {
  name: 'gateway-crash-after-commit',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'bistro-nord',
            date: '2032-02-09',
            time: '20:00',
            party_size: 2,
            name: 'Frances Allen',
          },
        },
      ],
    },
  },
  // A long answer to the tool: the agent is still talking when the booking commits.
  toolOutputs: {
    book_table:
      'One moment please. While the restaurant confirms your table, let me tell you about tonight: grilled sea bass, a risotto with wild mushrooms, and a lemon tart to finish.',
  },
  systemMessage: 'Your table is confirmed.',
};

/** Commits while the tool's long answer is still being spoken (below the provider timeout, 5 s). */
const BOOKING_LATENCY_MS = 1_000;

const scenario = gatewayCrashScenario(SCRIPT);

describe('when the gateway dies after the commit but before the acknowledgement is spoken', () => {
  it(
    'should not count the result as told, and deliver it out of band once through the replacement gateway',
    { timeout: 120_000 },
    async () => {
      const setting = await scenario.callAndBook({
        bookingLatencyMs: BOOKING_LATENCY_MS,
        holdMs: 15_000,
        timeoutSeconds: 20,
      });
      const { worker, gatewayA, call } = setting;
      const booking = await waitFor(
        async () =>
          (await worker.operations(call.session_id)).find(
            (op) => op.action === 'book_table' && op.state === 'COMMITTED',
          ),
        10_000,
        'the booking to commit',
      );
      // The gate has decided: tell the caller once the agent stops talking. Nothing has been said yet.
      const decided = await waitFor(
        async () =>
          (await gatewayA.timeline(call.session_id)).find(
            (e) => e.type === 'gate_decision' && e.detail.operationId === booking.operation_id,
          ),
        5_000,
        'the gate decision',
      );
      expect(decided.detail).toMatchObject({ decision: 'speak_when_idle' });
      const beforeCrash = await gatewayA.timeline(call.session_id);
      expect(beforeCrash.some((e) => e.type === 'result_spoken' || e.type === 'delivered')).toBe(
        false,
      );
      await scenario.kill(setting);

      const gatewayB = await scenario.startReplacement(setting.shared);
      await expectDeliveredOutOfBandOnce(worker, call.session_id, booking.operation_id);

      // The call's record, read through the replacement: never spoken, delivered once, out of band, after the commit.
      const timeline = await gatewayB.timeline(call.session_id);
      expect(timeline.some((e) => e.type === 'result_spoken')).toBe(false);
      expect(timeline.filter((e) => e.type === 'delivered').map((e) => e.detail.channel)).toEqual([
        'out_of_band',
      ]);
      const committedAt =
        timeline.find(
          (e) => e.type === 'operation_committed' && e.detail.operation_id === booking.operation_id,
        )?.at ?? NaN;
      const outOfBandAt = timeline.find((e) => e.type === 'delivered')?.at ?? NaN;
      expect(committedAt).toBeLessThan(outOfBandAt);
      expect((await setting.lostCall).exitCode).not.toBe(0);
    },
  );
});
