/**
 * Race: the caller hangs up while their booking is still with the system of record. The call ends
 * (model closed, media released), the operation finishes anyway, and its result reaches the caller
 * out of band exactly once.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startCallgate } from '../e2e/callgate-process.ts';
import { dial } from './place-call.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'hangup-before-result',
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
            date: '2031-06-02',
            time: '20:00',
            party_size: 2,
            name: 'Ada Lovelace',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** The sandbox holds the booking this long before committing: well past the caller's hang-up, below the provider timeout (5 s). */
const BOOKING_LATENCY_MS = 3_500;
/** The whole call: the greeting, the key press after it, and a little of the tool turn. */
const CALL_MS = 4_000;

const own = closeAfterEach();

describe('when the caller hangs up before the booking result arrives', () => {
  it(
    'should commit the booking once and deliver its result out of band exactly once',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      await cg.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp } = await dial(cg.sipPort, {
        service: '1000',
        holdMs: CALL_MS,
        timeoutSeconds: 30,
        own,
        hearGreeting: false,
      });

      await waitFor(
        async () => (rtp.received.length > 0 ? true : undefined),
        10_000,
        'the first RTP from callgate',
      );
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      rtp.press('1');
      const started = await waitFor(
        async () => (await cg.operations(call.session_id)).find((op) => op.action === 'book_table'),
        6_000,
        'the booking to be admitted',
      );
      expect(started.state).not.toBe('COMMITTED');

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(
        (await cg.operations(call.session_id)).find(
          (op) => op.operation_id === started.operation_id,
        )?.state,
      ).not.toBe('COMMITTED');

      const delivered = await cg.delivered(
        call.session_id,
        (o) => o.operation_id === started.operation_id,
      );
      expect(delivered.state).toBe('COMMITTED');
      expect(delivered.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
      });
      expect(delivered.delivery?.reasons).toContain('caller_hung_up');

      // The out-of-band message lands at the sandbox once, and stays once.
      const messages = await messagesOnceSettled(cg.sandboxUrl, started.operation_id);
      expect(messages).toHaveLength(1);
      expect(messages[0]?.deliveries).toBe(1);
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([started.operation_id]);

      // Causal order on the call's timeline: the call ended before the commit, the gate decided after it.
      const timeline = await cg.timeline(call.session_id);
      const at = (source: string, type: string) =>
        timeline.find((e) => e.source === source && e.type === type)?.at ?? NaN;
      expect(at('call', 'ended')).toBeLessThan(at('operation', 'operation_committed'));
      expect(at('operation', 'operation_committed')).toBeLessThanOrEqual(
        at('audit', 'gate_decision'),
      );
      expect(timeline.filter((e) => e.type === 'delivered').map((e) => e.detail.channel)).toEqual([
        'out_of_band',
      ]);
      expect(timeline.find((e) => e.source === 'call' && e.type === 'ended')?.detail).toMatchObject(
        { reason: 'caller_hung_up' },
      );
    },
  );
});
