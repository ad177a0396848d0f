/**
 * Race: a provider fails while the caller waits for their action. Two providers, two rules:
 *   - bookings honours idempotency keys: the first attempt fails (503) and the retry books once;
 *   - payments does not: the refund commits but its answer is lost, so it is never retried
 *     blindly; reconciliation looks it up by our reference and finds it: refunded once.
 * Each caller is told the outcome once, on the call.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { dial } from './place-call.ts';
import { startCallgate, type CallgateProcess } from '../e2e/callgate-process.ts';

const SCRIPT = {
  name: 'retry-with-and-without-idempotency',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        { name: 'handoff', arguments: { agent: 'reservations' } },
        {
          name: 'book_table',
          arguments: {
            restaurant: 'bistro-nord',
            date: '2032-05-05',
            time: '12:00',
            party_size: 2,
            name: 'Leslie Lamport',
          },
        },
      ],
    },
    '2': {
      say: 'Refunding it.',
      tools: [
        {
          name: 'refund',
          arguments: { order_id: 'ord_1007', amount_cents: 4250, reason: 'cold soup' },
        },
      ],
    },
  },
  toolOutputs: { default: 'Okay.' },
  systemMessage: 'Done.',
};

const own = closeAfterEach();

interface HistoryView {
  history: { state: string; actor: string; reason: string }[];
}

async function callAndAct(
  cg: CallgateProcess,
  digit: '1' | '2',
  action: string,
): Promise<{ operationId: string; sessionId: string }> {
  const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: 12_000, own });
  const call = await cg.activeCall();
  await new Promise((resolve) => setTimeout(resolve, 800));
  rtp.press(digit);
  const told = await cg.delivered(call.session_id, (o) => o.action === action, 25_000);
  expect(told).toMatchObject({
    state: 'COMMITTED',
    delivery: { decision: 'spoken', channel: 'voice' },
  });
  const result = await sipp;
  // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
  rtp.mute();
  expect(result.exitCode, result.stderr).toBe(0);
  rtp.close();
  return { operationId: told.operation_id, sessionId: call.session_id };
}

describe('when a provider fails during a caller’s action', () => {
  it(
    'should retry the idempotent booking into one booking, and reconcile the non-idempotent refund into one refund',
    { timeout: 120_000 },
    async () => {
      const cg = own(
        await startCallgate({
          script: SCRIPT,
          agent: 'billing',
          overrides: (config) => {
            const providers = config.providers as Record<string, Record<string, unknown>>;
            // Every provider answers within 1 s here, so "not found" may be believed after 1.2 s.
            for (const name of Object.keys(providers))
              providers[name] = { ...providers[name], timeoutMs: 1_000 };
            config.worker = {
              reconcileGraceMs: 1_200,
              reconcileBackoffMs: 200,
              reconcileMaxBackoffMs: 1_000,
            };
          },
        }),
      );
      await cg.addFault({
        fault: 'error=503',
        service: 'bookings',
        operation: 'book',
        nth: 1,
        times: 1,
      });
      await cg.addFault({
        fault: 'commit-then-timeout',
        service: 'payments',
        operation: 'refund',
        nth: 1,
        times: 1,
      });

      const booking = await callAndAct(cg, '1', 'book_table');
      const bookingHistory = (
        await cg.get<HistoryView>(`/v1/operations/${booking.operationId}`)
      ).history.map((h) => h.state);
      expect(bookingHistory).toContain('FAILED_RETRYABLE');
      expect(bookingHistory.filter((s) => s === 'RUNNING').length).toBeGreaterThanOrEqual(2);
      expect(bookingHistory.at(-1)).toBe('COMMITTED');
      expect(bookingHistory).not.toContain('UNKNOWN');

      const refund = await callAndAct(cg, '2', 'refund');
      const refundHistory = (
        await cg.get<HistoryView>(`/v1/operations/${refund.operationId}`)
      ).history.map((h) => h.state);
      expect(refundHistory).toContain('UNKNOWN');
      expect(refundHistory.filter((s) => s === 'RUNNING')).toHaveLength(1);
      expect(refundHistory.at(-1)).toBe('COMMITTED');

      const effects = (
        await cg.get<{ effects: { service: string; operation: string; reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects`,
        )
      ).effects;
      expect(effects.map((e) => [e.service, e.operation, e.reference])).toEqual([
        ['bookings', 'book', booking.operationId],
        ['payments', 'refund', refund.operationId],
      ]);
    },
  );
});
