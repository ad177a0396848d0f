/**
 * Race: the booking reaches the system of record, which commits it, but the answer never comes
 * back (the provider call times out after sending the mutation). The operation goes UNKNOWN; the
 * caller is not told anything yet (the gate says reconcile first); reconciliation finds the
 * booking, the operation commits, and only then is the caller told, once. Nothing is booked twice.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';

const SCRIPT = {
  name: 'unknown-then-reconciled',
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
            date: '2032-02-29',
            time: '18:00',
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

/** The provider call gives up this soon; the sandbox holds its answer far longer. */
const PROVIDER_TIMEOUT_MS = 1_000;

const own = closeAfterEach();

describe('when the booking commits at the provider but its answer is lost', () => {
  it(
    'should go UNKNOWN, tell nothing until reconciled, then commit and tell the caller once',
    { timeout: 90_000 },
    async () => {
      const cg = await startCallgate({
        script: SCRIPT,
        agent: 'reservations',
        overrides: (config) => {
          const providers = config.providers as Record<string, Record<string, unknown>>;
          // Every provider answers within the timeout here, so "not found" may be believed after 1.2 s.
          for (const name of Object.keys(providers))
            providers[name] = { ...providers[name], timeoutMs: PROVIDER_TIMEOUT_MS };
          config.worker = {
            reconcileGraceMs: 1_200,
            reconcileBackoffMs: 200,
            reconcileMaxBackoffMs: 1_000,
          };
          // One attempt: the lost answer goes to reconciliation (a retry would first void the lost
          // attempt at the provider and learn there that it committed, which is quicker but not this story).
          for (const tenant of config.tenants as {
            actions?: Record<string, Record<string, unknown>>;
          }[]) {
            const book = tenant.actions?.book_table;
            if (book)
              book.retry = {
                ...(book.retry as Record<string, unknown> | undefined),
                maxAttempts: 1,
              };
          }
        },
      });
      own(cg);
      await cg.addFault({ fault: 'commit-then-timeout', service: 'bookings', operation: 'book' });
      const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: 14_000, own });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 800));
      rtp.press('1');

      const told = await cg.delivered(call.session_id, (o) => o.action === 'book_table', 25_000);
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      expect(told).toMatchObject({
        state: 'COMMITTED',
        delivery: { decision: 'spoken', channel: 'voice' },
      });
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([told.operation_id]);

      // Causal order: RUNNING, UNKNOWN (gate: reconcile first, nothing said), COMMITTED, spoken once.
      const timeline = await cg.timeline(call.session_id);
      const states = timeline.filter((e) => e.source === 'operation').map((e) => e.type);
      expect(states.indexOf('operation_unknown')).toBeGreaterThan(
        states.indexOf('operation_running'),
      );
      expect(states.indexOf('operation_committed')).toBeGreaterThan(
        states.indexOf('operation_unknown'),
      );
      const decisions = timeline
        .filter((e) => e.type === 'gate_decision')
        .map((e) => e.detail.decision);
      expect(decisions[0]).toBe('reconcile_first');
      expect(decisions.slice(1)).not.toContain('reconcile_first');
      const unknownAt = timeline.find((e) => e.type === 'operation_unknown')?.at ?? NaN;
      const committedAt = timeline.find((e) => e.type === 'operation_committed')?.at ?? NaN;
      const spoken = timeline.filter((e) => e.type === 'result_spoken');
      expect(spoken).toHaveLength(1);
      expect(spoken[0]?.detail).toMatchObject({
        operationId: told.operation_id,
        status: 'completed',
      });
      expect(spoken[0]?.at).toBeGreaterThan(committedAt);
      expect(
        timeline.filter((e) => e.type === 'delivered' && e.at > unknownAt && e.at < committedAt),
      ).toEqual([]);
    },
  );
});
