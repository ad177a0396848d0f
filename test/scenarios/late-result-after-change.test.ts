/**
 * Race: the caller books 19:30, then changes their mind to 20:30 while the first booking is still
 * held at the system of record. The newer request supersedes the older one (same goal): the older
 * is cancelled at the provider before it takes effect, and its late result is suppressed; the
 * caller is told the 20:30 booking once, and the system of record holds that one booking only.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';
import { sandboxMessages } from '../support/sandbox-messages.ts';

const BOOKING = {
  restaurant: 'trattoria-roma',
  date: '2032-04-04',
  party_size: 2,
  name: 'Donald Knuth',
};
const SCRIPT = {
  name: 'late-result-after-change',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking half past seven.',
      tools: [{ name: 'book_table', arguments: { ...BOOKING, time: '19:30' } }],
    },
    '4': {
      say: 'Changing it to half past eight.',
      tools: [{ name: 'book_table', arguments: { ...BOOKING, time: '20:30' } }],
    },
  },
  toolOutputs: { book_table: 'Okay.' },
  systemMessage: 'Noted.',
};

const BOOKING_LATENCY_MS = 4_000;

const own = closeAfterEach();

describe('when the caller changes the booking time while the first booking runs', () => {
  it(
    'should cancel and suppress the stale booking, and book and tell only the new one',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      await cg.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: 16_000, own });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 800));
      rtp.press('1');
      const older = await waitFor(
        async () =>
          (await cg.operations(call.session_id)).find(
            (op) => op.action === 'book_table' && op.state === 'RUNNING',
          ),
        8_000,
        'the 19:30 booking to run',
      );
      rtp.press('4');
      const newer = await waitFor(
        async () =>
          (await cg.operations(call.session_id)).find(
            (op) => op.action === 'book_table' && op.operation_id !== older.operation_id,
          ),
        10_000,
        'the 20:30 booking',
      );

      await waitFor(
        async () => {
          const ops = await cg.operations(call.session_id);
          const done = ops.filter(
            (op) =>
              op.action === 'book_table' &&
              op.delivery !== undefined &&
              ['COMMITTED', 'FAILED_FINAL', 'CANCELLED'].includes(op.state),
          );
          return done.length >= 2 &&
            ops.find((op) => op.operation_id === newer.operation_id)?.delivery?.delivered === true
            ? true
            : undefined;
        },
        20_000,
        'both outcomes decided and the new one told',
      );
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      const ops = await cg.operations(call.session_id);
      const timeline = await cg.timeline(call.session_id);
      // The older booking was cancelled at the provider before it took effect; its late result is suppressed.
      const stale = ops.find((op) => op.operation_id === older.operation_id);
      expect(stale?.state).toBe('CANCELLED');
      expect(stale?.delivery).toMatchObject({ decision: 'suppress', delivered: false });
      expect(stale?.delivery?.reasons).toContain('superseded_no_effect');
      expect(timeline.find((e) => e.type === 'superseded')?.detail).toMatchObject({
        operationId: older.operation_id,
        by: newer.operation_id,
        action: 'cancelled',
      });
      // The new one is the one the caller hears about, once, by voice.
      expect(ops.find((op) => op.operation_id === newer.operation_id)).toMatchObject({
        state: 'COMMITTED',
        delivery: { decision: 'spoken', channel: 'voice' },
      });
      expect(
        timeline.filter((e) => e.type === 'result_spoken').map((e) => e.detail.operationId),
      ).toEqual([newer.operation_id]);
      // The system of record holds one booking: 20:30.
      const effects = (
        await cg.get<{
          effects: { operation: string; reference?: string; result: { time?: string } }[];
        }>(`${cg.sandboxUrl}/admin/effects?service=bookings`)
      ).effects;
      expect(effects.map((e) => [e.operation, e.reference, e.result.time])).toEqual([
        ['book', newer.operation_id, '20:30'],
      ]);
      for (const op of [older, newer])
        expect(await sandboxMessages(cg.sandboxUrl, op.operation_id)).toEqual([]);
    },
  );
});
