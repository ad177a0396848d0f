import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking, CANCEL_BOOKING } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-undo-owed-told';
let a: AgentsHarness;

beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        cancel_booking: { ...CANCEL_BOOKING, policy: 'reject', maxConcurrent: 1 },
      },
    },
  });
});
afterAll(async () => a.close());

describe('when the caller changes a committed booking while cancellations are busy', () => {
  it('should tell the model the old booking is not undone yet, undo it once later and tell the caller then', async () => {
    const { session, port } = a.call(TENANT);
    const date = booking().date as string;
    const args = (time: string) => ({
      restaurant: 'bistro-nord',
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

    // Another call's cancellation holds the only place for cancellations.
    await a.h.sandbox.addRule({
      fault: 'latency=800',
      tenant: TENANT,
      operation: 'cancel_booking',
      times: 1,
    });
    expect(
      (
        await a.h.layer.admit({
          tenantId: TENANT,
          action: 'cancel_booking',
          args: { booking_id: 'bk_999997' },
          scope: a.h.scope(),
        })
      ).type,
    ).toBe('started');

    const second = await a.runtime.handle(session, {
      callId: 'call_2',
      name: 'book_table',
      arguments: args('19:30'),
    });
    expect(second).toMatchObject({
      status: 'started',
      earlier_request: `The earlier request ${firstId} will be undone shortly; do not say it is undone yet.`,
    });

    const undoId = await waitFor(
      async () => (await a.h.layer.ledger.get(TENANT, firstId))?.compensatedBy,
      10_000,
      'the owed undo to be admitted',
    );
    expect((await a.h.layer.waitFor(TENANT, undoId, 10_000))?.state).toBe('COMMITTED');
    await waitFor(
      async () => (port.completed(undoId).length > 0 ? true : undefined),
      10_000,
      'the undo told',
    );
    expect(port.completed(undoId)[0]?.message).toContain(
      `the earlier request ${firstId} is undone`,
    );
    const cancellations = await a.h.sandbox.effects({
      tenant: TENANT,
      operation: 'cancel_booking',
    });
    expect(cancellations.map((e) => e.reference)).toEqual([undoId]);
  });
});
