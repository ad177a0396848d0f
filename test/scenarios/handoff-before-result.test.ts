/**
 * Race: the caller is handed from the reservations agent to the concierge while their booking is
 * still running. The call and the operation stay; the model is reconfigured with the concierge's
 * instructions and tools; the result is routed to the concierge (who may reveal bookings) and
 * spoken on the same call, once.
 */
import { describe, expect, it } from 'vitest';
import { exampleAgent } from '../support/example-agents.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const concierge = exampleAgent('concierge');

const SCRIPT = {
  name: 'handoff-before-result',
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
            date: '2031-12-01',
            time: '13:00',
            party_size: 2,
            name: 'Barbara Liskov',
          },
        },
      ],
    },
    '2': { tools: [{ name: 'handoff', arguments: { agent: 'concierge' } }] },
  },
  toolOutputs: { book_table: 'One moment.', handoff: 'The concierge here.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking is held this long at the provider: the handoff happens inside it. */
const BOOKING_LATENCY_MS = 3_000;

const own = closeAfterEach();

describe('when the caller is handed to another agent before the booking result arrives', () => {
  it(
    'should keep the call and the operation, reconfigure the model, and speak the result through the new agent once',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model } = await placeCall(gw, { holdMs: 12_000, own });
      await new Promise((resolve) => setTimeout(resolve, 500));
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking',
      );
      rtp.press('2');
      await waitFor(
        async () => (gw.events.some((e) => e.event.type === 'agent_changed') ? true : undefined),
        8_000,
        'the handoff',
      );
      const ledger = gw.agents.h.layer.ledger;
      expect((await ledger.get('demo', operationId))?.state).not.toBe('COMMITTED');
      expect(call.agent.activeAgent).toBe('concierge');
      expect(gw.events.find((e) => e.event.type === 'agent_changed')?.event).toEqual({
        type: 'agent_changed',
        from: 'reservations',
        to: 'concierge',
      });
      // The model now speaks as the concierge, with the concierge's tools only.
      await waitFor(
        async () =>
          model.session.configuration.instructions?.startsWith(concierge.instructions)
            ? true
            : undefined,
        5_000,
        'the model reconfigured',
      );
      // The new agent is told what the call is waiting for.
      expect(model.session.configuration.instructions).toContain(operationId);
      expect(model.session.configuration.instructions).toContain(
        'handed to you by the reservations agent',
      );
      const tools = (model.session.configuration.tools ?? []).map(
        (t) => (t as { name?: string }).name,
      );
      expect(tools.sort()).toEqual(concierge.tools.map((t) => t.name).sort());

      const op = await gw.delivered(operationId);
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        agent: 'concierge',
      });
      expect(op.delivery?.reasons).toContain('handoff_agent_may_reveal');
      expect(
        model.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toHaveLength(1);
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
      const audit = await gw.agents.audit.read(call.sessionId);
      expect(audit.find((r) => r.event.type === 'handoff')?.event).toMatchObject({
        from: 'reservations',
        to: 'concierge',
        pending: 1,
      });
      expect(gw.simulator.connections.filter((c) => c !== model)).toHaveLength(0);
    },
  );
});
