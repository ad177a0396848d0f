/**
 * Race: the booking has committed and the agent is telling the caller; the caller talks over it.
 * The acknowledgement is cut (its response ends cancelled), so it does not count as delivered; it
 * is said again once the caller is idle, and only then recorded as delivered.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'barge-in-during-acknowledgement',
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
            date: '2031-12-03',
            time: '12:30',
            party_size: 2,
            name: 'Grace Hopper',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  // Long enough to be talked over.
  systemMessage:
    'Good news: your table is confirmed for two people at half past twelve, and the restaurant will keep it for fifteen minutes after that time, so there is no need to hurry on the way.',
};

const CALLER_TALKS_MS = 1_200;

const own = closeAfterEach();

describe('when the caller barges in during the spoken acknowledgement of a committed booking', () => {
  // Real-time speech over real RTP: one retry absorbs a scheduling stall on a loaded machine.
  it(
    'should not count the cut acknowledgement as delivered, and say it again when the caller is idle',
    { timeout: 90_000, retry: 1 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT, speechSpeed: 1 }));
      // The booking takes a moment, so the agent's "One moment." is over before the result is told.
      await gw.addFault({ fault: 'latency=2000', service: 'bookings', operation: 'book' });
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 25_000, timeoutSeconds: 60, own });
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
      await waitFor(
        async () => (heardResult() === 1 ? true : undefined),
        15_000,
        'the result given to the model',
      );
      const startedAt = Date.now();
      await waitFor(
        async () => (rtp.audibleSince(startedAt) >= 25 ? true : undefined),
        8_000,
        'half a second of the acknowledgement',
      );
      rtp.speak(CALLER_TALKS_MS);

      await waitFor(
        async () =>
          (await gw.agents.audit.read(call.sessionId)).some(
            (r) => r.event.type === 'delivery_interrupted',
          )
            ? true
            : undefined,
        10_000,
        'the cut acknowledgement',
      );
      const ledger = gw.agents.h.layer.ledger;
      expect((await ledger.get('demo', operationId))?.delivery?.delivered).not.toBe(true);

      await gw.delivered(operationId, 20_000);
      expect(heardResult()).toBe(2);
      expect((await ledger.get('demo', operationId))?.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        delivered: true,
      });
      const audit = (await gw.agents.audit.read(call.sessionId)).map((r) => r.event.type);
      expect(audit.indexOf('delivery_interrupted')).toBeLessThan(audit.lastIndexOf('delivered'));
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
