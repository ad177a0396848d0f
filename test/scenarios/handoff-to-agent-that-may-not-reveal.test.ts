/**
 * Race: the caller is handed from reservations to billing while their booking runs. Billing may
 * not reveal booking results, so the result is not spoken on the call; the caller still learns of
 * the real effect, out of band, exactly once.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'handoff-to-agent-that-may-not-reveal',
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
            date: '2031-12-02',
            time: '20:00',
            party_size: 2,
            name: 'Ada Lovelace',
          },
        },
      ],
    },
    '2': { tools: [{ name: 'handoff', arguments: { agent: 'billing' } }] },
  },
  toolOutputs: { book_table: 'One moment.', handoff: 'Billing here.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking is held this long at the provider: the handoff happens inside it. */
const BOOKING_LATENCY_MS = 2_500;

const own = closeAfterEach();

describe('when the caller is handed to an agent that may not reveal the booking before its result', () => {
  it(
    'should not speak the result on the call, and send it out of band once',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 10_000, own });
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking',
      );
      rtp.press('2');
      await waitFor(
        async () => (call.agent.activeAgent === 'billing' ? true : undefined),
        8_000,
        'the handoff to billing',
      );

      const messages = await messagesOnceSettled(gw.sandboxUrl, operationId, { timeoutMs: 15_000 });
      const op = await gw.agents.h.layer.ledger.get('demo', operationId);
      expect(op?.state).toBe('COMMITTED');
      expect(op?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
        reasons: ['handoff_agent_may_not_reveal', 'committed'],
      });
      expect(messages).toEqual([expect.objectContaining({ deliveries: 1 })]);
      expect(
        model.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toHaveLength(0);
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);
    },
  );
});
