/**
 * Race: the booking has committed and the agent is telling the caller; the model streams faster
 * than real time, so it is done with the response while most of the confirmation is still queued
 * for the caller. The caller talks over the rest. What was cut was not heard: the result is not
 * recorded as spoken at the model's done, is offered again when the caller is idle, and only the
 * telling that played to its end counts as delivered.
 */
import { describe, expect, it } from 'vitest';
import type { CallEvent } from '../../gateway/call/call-events.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'barge-in-after-response-done',
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
            date: '2031-12-04',
            time: '19:30',
            party_size: 2,
            name: 'Grace Hopper',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  // Several seconds of speech: streamed at four times real time, most of it is queued at the done.
  systemMessage:
    'Good news: your table is confirmed for two people at half past seven, and the restaurant will keep it for fifteen minutes after that time, so there is no need to hurry on the way.',
};

/** The simulator streams at four times real time, as real models do (faster than playout). */
const SPEECH_SPEED = 4;
const CALLER_TALKS_MS = 1_200;

const own = closeAfterEach();

describe('when the caller barges in after the model is done with the confirmation but while it still plays', () => {
  it(
    'should not record the result as spoken at the done, and tell it again once the caller is idle',
    { timeout: 90_000, retry: 1 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT, speechSpeed: SPEECH_SPEED }));
      // The booking takes a moment, so the agent's "One moment." is over before the result is told.
      await gw.addFault({ fault: 'latency=1500', service: 'bookings', operation: 'book' });
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 30_000, timeoutSeconds: 60, own });
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking',
      );
      const heardResult = () =>
        model.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ).length;
      const ofCall = (predicate: (event: CallEvent) => boolean) =>
        gw.events.filter((e) => e.sessionId === call.sessionId && predicate(e.event));
      await waitFor(
        async () => (heardResult() === 1 ? true : undefined),
        15_000,
        'the result given to the model',
      );

      // The confirmation's response is done on the model's side: named by what the agent said in it.
      const confirmation = await waitFor(
        async () =>
          ofCall((e) => e.type === 'agent_said' && e.text.includes('fifteen minutes')).map((e) =>
            e.event.type === 'agent_said' ? e.event.responseId : undefined,
          )[0],
        15_000,
        'the confirmation transcript',
      );
      const doneAt = await waitFor(
        async () =>
          ofCall(
            (e) => e.type === 'response' && e.state === 'done' && e.responseId === confirmation,
          )[0]?.at,
        10_000,
        'the confirmation response done',
      );
      const ledger = gw.agents.h.layer.ledger;
      // The model is done, the caller is still hearing it: not told yet.
      expect((await ledger.get('demo', operationId))?.delivery?.delivered).not.toBe(true);
      const stillPlaying = Date.now();
      await waitFor(
        async () => (rtp.audibleSince(stillPlaying) >= 10 ? true : undefined),
        3_000,
        'the confirmation still playing after the done',
      );
      rtp.speak(CALLER_TALKS_MS);

      const bargeIn = await waitFor(
        async () => ofCall((e) => e.type === 'barge_in')[0]?.event,
        5_000,
        'the barge-in',
      );
      expect(bargeIn).toMatchObject({ type: 'barge_in' });
      expect(bargeIn.type === 'barge_in' ? bargeIn.droppedMs : 0).toBeGreaterThan(1_000);
      await waitFor(
        async () =>
          (await gw.agents.audit.read(call.sessionId)).some(
            (r) => r.event.type === 'delivery_interrupted',
          )
            ? true
            : undefined,
        10_000,
        'the cut confirmation',
      );
      expect((await ledger.get('demo', operationId))?.delivery?.delivered).not.toBe(true);
      expect(ofCall((e) => e.type === 'result_spoken')[0]?.event).toMatchObject({
        status: 'cancelled',
        responseId: confirmation,
      });
      expect(ofCall((e) => e.type === 'result_spoken')[0]?.at ?? 0).toBeGreaterThan(doneAt);

      // Told again when the caller is idle; that telling plays to its end and is the one recorded.
      const op = await gw.delivered(operationId, 30_000);
      expect(heardResult()).toBe(2);
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
      expect(op.delivery?.responseId).not.toBe(confirmation);
      const audit = (await gw.agents.audit.read(call.sessionId)).map((r) => r.event.type);
      expect(audit.filter((type) => type === 'delivered')).toHaveLength(1);
      expect(audit.indexOf('delivery_interrupted')).toBeLessThan(audit.indexOf('delivered'));
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
      rtp.mute();
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);
    },
  );
});
