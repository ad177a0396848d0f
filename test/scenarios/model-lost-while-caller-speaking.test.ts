/**
 * Race: the model's connection drops while the caller is talking (after speech_started, before
 * speech_stopped) and a booking runs. The speech_stopped of that turn never comes: the re-opened
 * session's turn detection starts afresh. The call must not stay marked as "caller speaking", or
 * the gate holds the booking's result until the caller happens to speak again.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'model-lost-while-caller-speaking',
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
            date: '2031-09-21',
            time: '19:00',
            party_size: 2,
            name: 'Niklaus Wirth',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking commits after the drop and the re-open (below the in-process gateway's provider timeout, 10 s). */
const BOOKING_LATENCY_MS = 3_000;

const own = closeAfterEach();

describe('when the model connection drops while the caller is talking', () => {
  it(
    'should not keep the caller marked as speaking on the new session, and tell the result there without waiting for the caller',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model: firstConnection } = await placeCall(gw, { holdMs: 15_000, own });
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking to be owned by the call',
      );

      // The model hears the caller start a turn (as its VAD reports it), then the connection is gone
      // before the turn ends. The caller is silent from here on: nothing on the new session will say
      // the turn is over.
      firstConnection.session.sendRaw(
        JSON.stringify({
          type: 'input_audio_buffer.speech_started',
          event_id: 'event_caller_turn',
          audio_start_ms: 4_000,
          item_id: 'item_caller_turn',
        }),
      );
      await waitFor(
        async () =>
          gw.events.some((e) => e.event.type === 'caller_speech' && e.event.state === 'started')
            ? true
            : undefined,
        2_000,
        'the caller turn to start',
      );
      expect(call.agent.callerSpeaking).toBe(true);
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
      expect(call.agent.callerSpeaking).toBe(false);

      // The result is told on the new session, without the caller having spoken again.
      const op = await gw.delivered(operationId, 15_000);
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
      expect(op.delivery?.reasons ?? []).not.toContain('caller_speaking');
      const toldOn = (connection: typeof firstConnection) =>
        connection.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ).length;
      expect(toldOn(firstConnection)).toBe(0);
      expect(toldOn(secondConnection)).toBe(1);
      const told = secondConnection.session.said.find((s) => s.text === SCRIPT.systemMessage);
      expect(told?.status).toBe('completed');
      expect(
        gw.events
          .filter((e) => e.event.type === 'caller_speech')
          .map((e) => e.event.type === 'caller_speech' && e.event.state),
      ).toEqual(['started']);

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      // The caller heard the result's words, on real RTP, from when the new session started saying them.
      expect(rtp.audibleSince(told?.startedAtMs ?? Infinity)).toBeGreaterThan(25);
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
    },
  );
});
