/**
 * Race: the caller asks for a person while their booking is still RUNNING. The transfer goes
 * through (REFER 202, NOTIFY 200, callgate's BYE); the booking is not cancelled, commits once, and
 * its result follows the caller out of band exactly once.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'transfer-with-pending-booking',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'trattoria-roma',
            date: '2031-08-21',
            time: '21:00',
            party_size: 6,
            name: 'Katherine Johnson',
          },
        },
      ],
    },
    '3': {
      say: 'Transferring you.',
      tools: [{ name: 'transfer_to_human', arguments: { reason: 'caller asked for a person' } }],
    },
  },
  toolOutputs: { book_table: 'One moment.', transfer_to_human: 'Goodbye.' },
  systemMessage: 'Your table is confirmed.',
};

/** Long enough that the transfer completes first; below the provider timeout (5 s). */
const BOOKING_LATENCY_MS = 4_500;

const own = closeAfterEach();

describe('when the caller is transferred to a person while the booking runs', () => {
  it(
    'should end callgate’s leg as transferred and send the booking result out of band once',
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
        scenario: 'uac-transfer-accepted.xml',
        own,
      });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      rtp.press('1');
      const booking = await waitFor(
        async () =>
          (await cg.operations(call.session_id)).find(
            (op) => op.action === 'book_table' && op.state === 'RUNNING',
          ),
        8_000,
        'the booking to run',
      );
      rtp.press('3');

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(
        result.firstLines.filter((line) =>
          /^(sent|received) (REFER|NOTIFY|BYE|SIP\/2\.0 202)/.test(line),
        ),
      ).toEqual([
        expect.stringMatching(/^received REFER /),
        'sent SIP/2.0 202 Accepted',
        expect.stringMatching(/^sent NOTIFY /),
        expect.stringMatching(/^sent NOTIFY /),
        expect.stringMatching(/^received BYE /),
      ]);

      const delivered = await cg.delivered(
        call.session_id,
        (o) => o.operation_id === booking.operation_id,
      );
      expect(delivered.state).toBe('COMMITTED');
      expect(delivered.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
      });
      expect(delivered.delivery?.reasons).toContain('transferred_to_human');

      expect(
        (await messagesOnceSettled(cg.sandboxUrl, booking.operation_id)).map((m) => m.deliveries),
      ).toEqual([1]);
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([booking.operation_id]);

      const timeline = await cg.timeline(call.session_id);
      const at = (source: string, type: string) =>
        timeline.find((e) => e.source === source && e.type === type)?.at ?? NaN;
      expect(
        timeline.find((e) => e.source === 'call' && e.type === 'transfer')?.detail,
      ).toMatchObject({ target: 'sip:frontdesk@127.0.0.1:5080', outcome: { type: 'succeeded' } });
      expect(
        timeline.find((e) => e.source === 'audit' && e.type === 'transfer')?.detail,
      ).toMatchObject({ pending: 1 });
      expect(timeline.find((e) => e.source === 'call' && e.type === 'ended')?.detail).toMatchObject(
        { reason: 'transferred', dialogReason: 'transferred' },
      );
      expect(at('call', 'ended')).toBeLessThan(at('operation', 'operation_committed'));
      expect(timeline.filter((e) => e.source === 'operation').map((e) => e.type)).not.toContain(
        'operation_cancelled',
      );
    },
  );
});
