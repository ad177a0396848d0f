/**
 * Race: the caller asks for the same booking twice while the first is still running (the model
 * calls book_table again with the same arguments). The second call is recognised by the
 * idempotency key: nothing new starts, the table is booked once, and the caller is told once.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';

const BOOKING = {
  restaurant: 'bistro-nord',
  date: '2031-11-05',
  time: '12:30',
  party_size: 2,
  name: 'Edsger Dijkstra',
};
const SCRIPT = {
  name: 'duplicate-request',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': { say: 'Booking it.', tools: [{ name: 'book_table', arguments: BOOKING }] },
    '2': { say: 'Booking it again.', tools: [{ name: 'book_table', arguments: BOOKING }] },
  },
  toolOutputs: { book_table: 'Okay.' },
  systemMessage: 'Your table is confirmed.',
};

const BOOKING_LATENCY_MS = 3_000;
const CALL_MS = 14_000;

const own = closeAfterEach();

describe('when the same booking is asked for twice in one call while the first runs', () => {
  it(
    'should answer the second as a duplicate, book once and tell the caller once',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      await cg.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: CALL_MS, own });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 800));
      rtp.press('1');
      const first = await waitFor(
        async () => (await cg.operations(call.session_id)).find((op) => op.action === 'book_table'),
        8_000,
        'the first booking',
      );
      rtp.press('2');
      const second = await waitFor(
        async () => (await cg.timeline(call.session_id)).filter((e) => e.type === 'tool_call')[1],
        8_000,
        'the second tool call',
      );
      expect(second.detail).toMatchObject({
        name: 'book_table',
        status: 'duplicate',
        operationId: first.operation_id,
      });
      expect(
        (await cg.operations(call.session_id)).find((op) => op.operation_id === first.operation_id)
          ?.state,
      ).not.toBe('COMMITTED');

      const told = await cg.delivered(
        call.session_id,
        (o) => o.operation_id === first.operation_id,
      );
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      expect((await cg.operations(call.session_id)).map((op) => op.operation_id)).toEqual([
        first.operation_id,
      ]);
      expect(told).toMatchObject({
        state: 'COMMITTED',
        delivery: { decision: 'spoken', channel: 'voice' },
      });
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([first.operation_id]);
      const timeline = await cg.timeline(call.session_id);
      expect(
        timeline.filter((e) => e.type === 'result_spoken' && e.detail.status === 'completed'),
      ).toHaveLength(1);
      expect(timeline.filter((e) => e.source === 'audit' && e.type === 'delivered')).toHaveLength(
        1,
      );
    },
  );
});
