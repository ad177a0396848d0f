/**
 * The caller's phone goes silent without hanging up (no RTP at all: a dead network, a crashed
 * phone). After the media timeout callgate ends the call itself: BYE on the wire, the model
 * session closed, the RTP ports released, the registry entry closed, and a booking still running
 * goes on and reaches the caller out of band once.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'media-timeout',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'sushi-kaito',
            date: '2032-06-06',
            time: '19:00',
            party_size: 2,
            name: 'Niklaus Wirth',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Noted.',
};

const MEDIA_TIMEOUT_MS = 1_500;
const BOOKING_LATENCY_MS = 4_000;

const own = closeAfterEach();

describe('when the caller’s RTP stops without a BYE', () => {
  it(
    'should hang up after the media timeout, release the media and send the pending result out of band once',
    { timeout: 90_000 },
    async () => {
      const gw = own(
        await startInProcessGateway({ script: SCRIPT, rtp: { mediaTimeoutMs: MEDIA_TIMEOUT_MS } }),
      );
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp } = await placeCall(gw, {
        scenario: 'uac-external-rtp-callee-bye.xml',
        timeoutSeconds: 30,
        own,
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking',
      );
      expect(gw.ports.inUse).toBe(1);
      const mutedAt = Date.now();
      rtp.mute();

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.firstLines.filter((line) => /BYE/.test(line))).toEqual([
        expect.stringMatching(/^received BYE /),
      ]);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ type: 'ended', reason: 'media_timeout' });
      expect(ended.at - mutedAt).toBeGreaterThanOrEqual(MEDIA_TIMEOUT_MS - 100);
      expect(gw.ports.inUse).toBe(0);
      expect(await gw.registry.get(call.sessionId)).toMatchObject({
        state: 'ended',
        endReason: 'media_timeout',
      });

      const op = await gw.delivered(operationId);
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
      });
      expect(await messagesOnceSettled(gw.sandboxUrl, operationId)).toHaveLength(1);
    },
  );
});
