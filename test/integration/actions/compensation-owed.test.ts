import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking, CANCEL_BOOKING, startHarness, type Harness } from '../../support/action-harness.ts';
import { compensationCount } from '../../support/compensation-metrics.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-undo-busy';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        // One cancellation at a time, and a request over that is answered busy at once.
        cancel_booking: { ...CANCEL_BOOKING, policy: 'reject', maxConcurrent: 1 },
      },
    },
  });
});
afterAll(async () => h.close());

describe('when a compensation is answered busy', () => {
  it('should be owed on the original and admitted later, cancelling the booking exactly once', async () => {
    const decision = await h.layer.admit({ tenantId: TENANT, action: 'book_table', args: booking(), scope: h.scope() });
    if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
    const id = decision.operationId;
    const booked = await h.layer.waitFor(TENANT, id, 10_000);
    expect(booked?.state).toBe('COMMITTED');
    const bookingId = String(booked?.result?.booking_id);
    const owedBefore = await compensationCount('cancel_booking', 'owed');

    // Another cancellation holds the action's only place for a while.
    await h.sandbox.addRule({ fault: 'latency=800', tenant: TENANT, operation: 'cancel_booking', times: 1 });
    const blocker = await h.layer.admit({ tenantId: TENANT, action: 'cancel_booking', args: { booking_id: 'bk_999999' }, scope: h.scope() });
    expect(blocker.type).toBe('started');

    const undo = await h.layer.compensate({ tenantId: TENANT, operationId: id }, { action: 'cancel_booking', args: { booking_id: bookingId }, scope: h.scope() });
    expect(undo).toMatchObject({ type: 'owed', compensates: id, reason: 'at_capacity' });
    expect(await h.layer.ledger.rawField({ tenantId: TENANT, operationId: id }, 'compensation_owed')).toBeDefined();
    expect(await h.layer.ledger.listOwedCompensations(TENANT)).toEqual([id]);
    expect(await compensationCount('cancel_booking', 'owed')).toBe(owedBefore + 1);

    // Once the place is free, the owed-compensation pass admits it and links it to the original.
    const compensationId = await waitFor(async () => (await h.layer.ledger.get(TENANT, id))?.compensatedBy, 10_000, 'the owed compensation to be admitted');
    const compensation = await h.layer.waitFor(TENANT, compensationId, 10_000);
    expect(compensation).toMatchObject({ state: 'COMMITTED', compensates: id, idempotencyKey: `comp_${id}` });
    expect(await h.layer.ledger.listOwedCompensations(TENANT)).toEqual([]);
    expect(await h.layer.ledger.rawField({ tenantId: TENANT, operationId: id }, 'compensation_owed')).toBeUndefined();

    // Asking again (the call repeating itself) gives the same undo, not a second one.
    expect(await h.layer.compensate({ tenantId: TENANT, operationId: id }, { action: 'cancel_booking', args: { booking_id: bookingId }, scope: h.scope() })).toEqual({
      type: 'already_compensated',
      compensatedBy: compensationId,
    });
    await h.layer.compensationsNow();
    const cancellations = await h.sandbox.effects({ tenant: TENANT, operation: 'cancel_booking' });
    expect(cancellations.map((e) => e.reference)).toEqual([compensationId]);
  });
});
