/**
 * Race: the result event of a booking reaches the gateway twice (a redelivered stream entry, a
 * replayed event). Through real SIP and RTP, the simulator, Redis, workers and the sandbox: the
 * caller is told once; the second event is suppressed as already told and recorded as such.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { testRedis } from '../support/redis.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'duplicate-result-event',
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
            date: '2031-11-02',
            time: '19:00',
            party_size: 2,
            name: 'Frances Allen',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

const own = closeAfterEach();

describe('when the result event of a booking arrives twice', () => {
  it(
    'should speak the result once and record the second as suppressed, already told',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 10_000, own });
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking',
      );
      const ledger = gw.agents.h.layer.ledger;
      // The event as it stands in the stream, read before delivery acknowledges and deletes it.
      const redis = testRedis();
      const key = gw.agents.delivery.streamKey('demo');
      const original = await waitFor(
        async () =>
          (await redis.xrange(key, '-', '+')).find(
            ([, fields]) => fields.includes(operationId) && fields.includes('COMMITTED'),
          ),
        8_000,
        'the result event in the stream',
      );
      await gw.delivered(operationId);

      // The same event again, as a redelivery would bring it.
      const decisionsOf = async () =>
        (await gw.agents.audit.read(call.sessionId)).flatMap((r) =>
          r.event.type === 'gate_decision' ? [r.event] : [],
        );
      const before = (await decisionsOf()).length;
      await redis.xadd(key, '*', ...original[1]);
      redis.disconnect();

      const after = await waitFor(
        async () => {
          const all = await decisionsOf();
          return all.length > before ? all : undefined;
        },
        8_000,
        'the gate decision on the duplicate',
      );
      expect(after.slice(before)).toEqual([
        expect.objectContaining({
          decision: 'suppress',
          reasons: expect.arrayContaining(['already_told']) as unknown,
        }),
      ]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(
        model.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toHaveLength(1);
      expect((await ledger.get('demo', operationId))?.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        delivered: true,
      });
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);
    },
  );
});
