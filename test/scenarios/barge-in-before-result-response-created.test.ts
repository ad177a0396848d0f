/**
 * Race: callgate has asked the model to tell a committed booking (system message and
 * response.create on the wire), and the caller starts talking before the model has created that
 * response. The response is created after the barge-in, so neither the server's interruption nor
 * the barge-in's playout clear covers it: the client cancels it once created, and the model may
 * stream a good deal of audio before the cancel reaches it. None of that audio may play over the
 * caller, its item is cut at 0 ms (the caller heard none of it), and the result is not counted as
 * told: it is said again once the caller's turn is over.
 */
import { describe, expect, it } from 'vitest';
import type { SimulatorConnection } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'barge-in-before-result-response-created',
  greeting: 'Hello.',
  fallback: 'Sorry, go ahead.',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'trattoria-roma',
            date: '2031-08-17',
            time: '13:00',
            party_size: 3,
            name: 'Frances Allen',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage:
    'Good news: your table for three is confirmed for one o clock, and the restaurant will hold it for fifteen minutes.',
};

/** The booking commits well after the agent's "One moment." is over. */
const BOOKING_LATENCY_MS = 3_000;
/**
 * How late the client's response.cancel reaches the model: a model streams faster than real time
 * (the simulator at twice), so this much late is about twice as much audio already sent.
 */
const CANCEL_LATENCY_MS = 1_000;

const own = closeAfterEach();

/** The model's side reads the client's response.cancel only `ms` after it arrives (a slow link or a busy model). */
function delayCancels(connection: SimulatorConnection, ms: number): void {
  const { session } = connection;
  const receive = session.receive.bind(session);
  session.receive = (text: string) => {
    if (text.includes('"response.cancel"')) setTimeout(() => receive(text), ms);
    else receive(text);
  };
}

function serverEvent(event: Record<string, unknown>): string {
  return JSON.stringify(event);
}

describe('when the caller barges in while the response that tells a result is being created', () => {
  it(
    'should play none of that response, cut its item at 0 ms, and tell the result again after the caller’s turn',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 20_000, own });
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking to be owned by the call',
      );
      // Greeting, "Booking it." and "One moment." are over; then the model stops reading, so the
      // result's response.create stays in flight.
      await waitFor(
        async () =>
          gw.events.filter((e) => e.event.type === 'response' && e.event.state === 'done').length >=
          3
            ? true
            : undefined,
        8_000,
        'the agent to finish talking',
      );
      model.pauseReading();
      await waitFor(
        async () =>
          (await gw.agents.audit.read(call.sessionId)).some(
            (r) => r.event.type === 'gate_decision' && r.event.operationId === operationId,
          )
            ? true
            : undefined,
        10_000,
        'the gate to decide on the result',
      );
      await new Promise((resolve) => setTimeout(resolve, 200));

      // The caller starts talking; the model then reads the create, answers it, and streams.
      const bargeAt = Date.now();
      model.session.sendRaw(
        serverEvent({
          type: 'input_audio_buffer.speech_started',
          event_id: 'event_barge_in',
          audio_start_ms: 9_000,
          item_id: 'item_barge_in',
        }),
      );
      await waitFor(
        async () => (call.agent.callerSpeaking ? true : undefined),
        2_000,
        'the caller turn to start',
      );
      delayCancels(model, CANCEL_LATENCY_MS);
      model.resumeReading();
      const first = await waitFor(
        async () =>
          model.session.said.find(
            (s) => s.text === SCRIPT.systemMessage && s.status !== 'in_progress',
          ),
        10_000,
        'the result response to end',
      );
      await waitFor(
        async () => (gw.events.some((e) => e.event.type === 'result_spoken') ? true : undefined),
        5_000,
        'the first telling to settle',
      );
      const stoppedAt = Date.now();
      model.session.sendRaw(
        serverEvent({
          type: 'input_audio_buffer.speech_stopped',
          event_id: 'event_turn_over',
          audio_end_ms: 11_000,
          item_id: 'item_barge_in',
        }),
      );

      // The model did speak, well before the cancel reached it: the caller heard none of it.
      expect(first.audioMsSent).toBeGreaterThan(500);
      expect(rtp.audibleSince(bargeAt, stoppedAt)).toBe(0);
      // On the wire: the response was cancelled once created, and its item cut where the caller heard
      // it, at 0 ms (sent at its response.done; the model reads it a moment later).
      const sent = (type: string) =>
        model.session.wire.filter((w) => w.direction === 'in' && w.type === type);
      await waitFor(
        async () => (sent('conversation.item.truncate').length > 0 ? true : undefined),
        3_000,
        'the cut of the unheard item',
      );
      expect(sent('response.cancel').map((w) => w.event.response_id)).toEqual([first.responseId]);
      expect(
        sent('conversation.item.truncate').map((w) => ({
          item: w.event.item_id,
          ms: w.event.audio_end_ms,
        })),
      ).toEqual([{ item: first.itemId, ms: 0 }]);
      expect(first.truncatedAtMs).toBe(0);

      // Not counted as told: said again once the caller's turn is over, and told then.
      const op = await gw.delivered(operationId, 15_000);
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
      const spoken = gw.events.flatMap((e) =>
        e.event.type === 'result_spoken' && e.event.operationId === operationId ? [e.event] : [],
      );
      expect(spoken.map((e) => e.status)).toEqual(['cancelled', 'completed']);
      expect(spoken[0]?.responseId).toBe(first.responseId);
      expect(
        model.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toHaveLength(2);
      const audit = (await gw.agents.audit.read(call.sessionId)).map((r) => r.event.type);
      expect(audit.indexOf('delivery_interrupted')).toBeGreaterThanOrEqual(0);
      expect(audit.indexOf('delivery_interrupted')).toBeLessThan(audit.lastIndexOf('delivered'));
      const second = model.session.said.filter((s) => s.text === SCRIPT.systemMessage)[1];
      expect(second).toMatchObject({ status: 'completed' });
      expect(second?.truncatedAtMs).toBeUndefined();

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      // The second telling was heard, on real RTP.
      expect(rtp.audibleSince(stoppedAt)).toBeGreaterThan(25);
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
    },
  );
});
