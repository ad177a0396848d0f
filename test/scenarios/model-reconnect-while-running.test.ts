/**
 * Race: the model's connection drops while a booking is RUNNING. The call stays up, a new model
 * session is opened once with a summary of the call (active agent, the pending operation and its
 * state), and the booking's result is spoken on the new session; nothing is lost or repeated.
 * A second loss in the same call ends it politely (BYE) and the result goes out of band instead.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import type { CallerRtp } from '../e2e/caller-rtp.ts';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'model-reconnect',
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
            date: '2031-09-30',
            time: '19:00',
            party_size: 2,
            name: 'Grace Hopper',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  // Results and notes are spoken as one short line (the gateway's result message is long).
  systemMessage: 'Noted.',
};

/** The booking stays RUNNING this long: the drop falls inside it (below the harness provider timeout, 1 s). */
const BOOKING_LATENCY_MS = 800;

const own = closeAfterEach();

async function bookingRunning(
  gw: InProcessGateway,
  rtp: CallerRtp,
): Promise<{ sessionId: string; operationId: string }> {
  await new Promise((resolve) => setTimeout(resolve, 500));
  rtp.press('1');
  const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
  const owned = await waitFor(
    async () => [...call.agent.operations.keys()][0],
    8_000,
    'the booking to be owned by the call',
  );
  return { sessionId: call.sessionId, operationId: owned };
}

describe('when the model connection drops while the booking runs', () => {
  it(
    'should re-open the model once with the pending operation in its context and speak the result there',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model: firstConnection } = await placeCall(gw, { holdMs: 9_000, own });
      const { operationId } = await bookingRunning(gw, rtp);
      const ledger = gw.agents.h.layer.ledger;
      expect((await ledger.get('demo', operationId))?.state).not.toBe('COMMITTED');

      const second = gw.simulator.nextConnection(10_000);
      firstConnection.terminate();
      const secondConnection = await second;
      await waitFor(
        async () => (secondConnection.session.configuration.instructions ? true : undefined),
        5_000,
        'the re-opened session to be configured',
      );
      const instructions = String(secondConnection.session.configuration.instructions);
      expect(instructions).toContain('The active agent is reservations');
      expect(instructions).toContain(operationId);

      const op = await gw.delivered(operationId);
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
      // Spoken by the re-opened session, which heard the result as a system message.
      expect(
        secondConnection.session.heard.some(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toBe(true);
      const spoken = gw.events.find((e) => e.event.type === 'result_spoken')?.event;
      expect(spoken).toMatchObject({ operationId, status: 'completed' });
      const spokenBy = spoken?.type === 'result_spoken' ? spoken.responseId : undefined;
      expect(secondConnection.session.said.find((s) => s.responseId === spokenBy)?.status).toBe(
        'completed',
      );
      expect(
        firstConnection.session.heard.some(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toBe(false);

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
      const types = gw.events.map((e) => e.event.type);
      expect(types.filter((t) => t === 'model_ready')).toHaveLength(2);
      expect(gw.events.find((e) => e.event.type === 'model_disconnected')?.event).toMatchObject({
        reason: 'network',
        willReopen: true,
      });
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ type: 'ended', reason: 'caller_hung_up' });
    },
  );

  it(
    'should end the call with BYE on a second loss and send the result out of band once',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const {
        rtp,
        sipp,
        model: firstConnection,
      } = await placeCall(gw, { scenario: 'uac-external-rtp-callee-bye.xml', own });
      const { operationId } = await bookingRunning(gw, rtp);

      const second = gw.simulator.nextConnection(10_000);
      firstConnection.terminate();
      const secondConnection = await second;
      await waitFor(
        async () =>
          gw.events.some((e) => e.event.type === 'model_ready' && e.event.attempt === 2)
            ? true
            : undefined,
        5_000,
        'the re-opened session',
      );
      secondConnection.terminate();

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
      expect(ended.event).toMatchObject({ type: 'ended', reason: 'model_lost' });
      expect(gw.events.filter((e) => e.event.type === 'ended')).toHaveLength(1);
      expect(gw.simulator.connections.length).toBeLessThanOrEqual(2);

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
