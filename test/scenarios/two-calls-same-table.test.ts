/**
 * Race: two callers on two SIP calls book the only table that fits their party at the same time.
 * Each call's request is its own operation (different conversations, different idempotency keys);
 * the system of record books the table once: one operation commits, the other fails, and each
 * caller is told their own outcome on their own call.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { isDelivered, startCallgate, type OperationView } from '../e2e/callgate-process.ts';
import { dial } from './place-call.ts';
import { sandboxMessages } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'two-calls-same-table',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  // Sushi Kaito has one table for eight.
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'sushi-kaito',
            date: '2031-10-10',
            time: '20:00',
            party_size: 8,
            name: 'Caller',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Here is the answer.',
};

/** Both bookings are held at the provider together, so they really overlap. */
const BOOKING_LATENCY_MS = 800;
const CALL_MS = 12_000;

const own = closeAfterEach();

describe('when two callers book the only table for eight at the same time', () => {
  it(
    'should book it once, fail the other operation, and tell each caller on their own call',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      await cg.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const [first, second] = await Promise.all([
        dial(cg.sipPort, { service: '1000', holdMs: CALL_MS, own }),
        dial(cg.sipPort, { service: '1000', holdMs: CALL_MS, own }),
      ]);
      const [a, b] = [first.rtp, second.rtp];
      const sipp = [first.sipp, second.sipp];
      const sessions = await waitFor(
        async () => {
          const active = (await cg.get<{ active: { session_id: string }[] }>('/v1/calls')).active;
          return active.length === 2 ? active.map((c) => c.session_id) : undefined;
        },
        5_000,
        'both calls in the session registry',
      );
      await new Promise((resolve) => setTimeout(resolve, 800));
      a.press('1');
      b.press('1');

      const told = await waitFor(
        async () => {
          const ops: OperationView[] = [];
          for (const id of sessions)
            ops.push(...(await cg.operations(id)).filter((op) => op.action === 'book_table'));
          return ops.length === 2 && ops.every(isDelivered) ? ops : undefined;
        },
        20_000,
        'both outcomes to be told',
      );
      for (const run of await Promise.all(sipp)) expect(run.exitCode, run.stderr).toBe(0);
      a.mute();
      b.mute();

      // One booking at the system of record; one operation committed, one failed, one per call.
      expect(told.map((op) => op.state).sort()).toEqual(['COMMITTED', 'FAILED_FINAL']);
      expect(new Set(told.map((op) => op.session_id)).size).toBe(2);
      const committed = told.find((op) => op.state === 'COMMITTED');
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([committed?.operation_id]);
      // Each outcome was spoken on the call that asked for it; nothing went out of band.
      for (const op of told) {
        expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
        const spoken = (await cg.timeline(op.session_id)).filter((e) => e.type === 'result_spoken');
        expect(spoken.map((e) => e.detail)).toEqual([
          expect.objectContaining({ operationId: op.operation_id, status: 'completed' }),
        ]);
        expect(await sandboxMessages(cg.sandboxUrl, op.operation_id)).toEqual([]);
      }
    },
  );
});
