import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking, CANCEL_BOOKING } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-undo-told';
let a: AgentsHarness;

beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        cancel_booking: {
          ...CANCEL_BOOKING,
          retry: { maxAttempts: 2, backoffMs: 20, maxBackoffMs: 40 },
        },
      },
    },
  });
});
afterAll(async () => a.close());

describe('when the caller changes a committed booking and undoing the old one fails', () => {
  it('should tell the caller the old booking still stands, never that it was undone', async () => {
    const { session, port } = a.call(TENANT);
    const date = booking().date as string;
    const args = (time: string) => ({
      restaurant: 'trattoria-roma',
      date,
      time,
      party_size: 2,
      name: 'Ada',
    });
    const first = await a.runtime.handle(session, {
      callId: 'call_1',
      name: 'book_table',
      arguments: args('19:00'),
    });
    const firstId = String(first.operation_id);
    await waitFor(
      async () => (port.completed(firstId).length > 0 ? true : undefined),
      10_000,
      'the first booking told',
    );

    // The bookings service refuses both attempts of the undo.
    await a.h.sandbox.addRule({
      fault: 'error=503',
      tenant: TENANT,
      operation: 'cancel_booking',
      times: 2,
    });
    const second = await a.runtime.handle(session, {
      callId: 'call_2',
      name: 'book_table',
      arguments: args('19:30'),
    });
    expect(second).toMatchObject({ status: 'started' });

    const undoId = await waitFor(
      async () =>
        (await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).find(
          (op) => op.compensates === firstId,
        )?.operationId,
      10_000,
      'the undo to be admitted',
    );
    await waitFor(
      async () => (port.completed(undoId).length > 0 ? true : undefined),
      10_000,
      'the failed undo told',
    );
    expect((await a.h.layer.ledger.get(TENANT, undoId))?.state).toBe('FAILED_FINAL');
    const told = port.completed(undoId)[0]?.message ?? '';
    expect(told).toContain(`${firstId} was NOT undone and still stands`);
    expect(told).not.toContain('went through');
    const delivery = (await a.h.layer.ledger.get(TENANT, undoId))?.delivery;
    expect(delivery).toMatchObject({ decision: 'spoken', delivered: true });
    expect(delivery?.reasons).toContain('undo_failed');
    // The old booking is still there, and may be undone again.
    expect(await a.h.sandbox.effects({ tenant: TENANT, operation: 'cancel_booking' })).toHaveLength(
      0,
    );
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, firstId))?.compensatedBy === undefined
          ? true
          : undefined,
      5_000,
      'the link to be released',
    );
  });
});
