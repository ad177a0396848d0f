import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BOOK,
  booking,
  CANCEL_BOOKING,
  startHarness,
  type Harness,
} from '../../support/action-harness.ts';
import { compensationCount } from '../../support/compensation-metrics.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-undo-busy';
const QUEUED = 'tenant-undo-queued';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        // One cancellation at a time, and a request over that is answered busy at once.
        cancel_booking: { ...CANCEL_BOOKING, policy: 'reject', maxConcurrent: 1 },
      },
      [QUEUED]: {
        book_table: BOOK,
        // One cancellation at a time; a queued one not started within 300 ms is cancelled unsent.
        cancel_booking: {
          ...CANCEL_BOOKING,
          policy: 'queue',
          maxConcurrent: 1,
          admissionDeadlineMs: 300,
        },
      },
    },
  });
});
afterAll(async () => h.close());

describe('when a compensation is answered busy', () => {
  it('should be owed on the original and admitted later, cancelling the booking exactly once', async () => {
    const decision = await h.layer.admit({
      tenantId: TENANT,
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
    const id = decision.operationId;
    const booked = await h.layer.waitFor(TENANT, id, 10_000);
    expect(booked?.state).toBe('COMMITTED');
    const bookingId = String(booked?.result?.booking_id);
    const owedBefore = await compensationCount('cancel_booking', 'owed');

    // Another cancellation holds the action's only place for a while.
    await h.sandbox.addRule({
      fault: 'latency=800',
      tenant: TENANT,
      operation: 'cancel_booking',
      times: 1,
    });
    const blocker = await h.layer.admit({
      tenantId: TENANT,
      action: 'cancel_booking',
      args: { booking_id: 'bk_999999' },
      scope: h.scope(),
    });
    expect(blocker.type).toBe('started');

    const undo = await h.layer.compensate(
      { tenantId: TENANT, operationId: id },
      { action: 'cancel_booking', args: { booking_id: bookingId }, scope: h.scope() },
    );
    expect(undo).toMatchObject({ type: 'owed', compensates: id, reason: 'at_capacity' });
    expect(
      await h.layer.ledger.rawField({ tenantId: TENANT, operationId: id }, 'compensation_owed'),
    ).toBeDefined();
    expect(await h.layer.ledger.listOwedCompensations(TENANT)).toEqual([id]);
    // Owed since now, on Redis's clock (the age gauge and its alert read this).
    const [counts] = await h.layer.ledger.owedCompensationCounts([TENANT]);
    expect(counts?.owed).toBe(1);
    expect(Math.abs((counts?.oldestSince ?? 0) - Date.now())).toBeLessThan(5_000);
    expect(await compensationCount('cancel_booking', 'owed')).toBe(owedBefore + 1);

    // Once the place is free, the owed-compensation pass admits it and links it to the original.
    const compensationId = await waitFor(
      async () => (await h.layer.ledger.get(TENANT, id))?.compensatedBy,
      10_000,
      'the owed compensation to be admitted',
    );
    const compensation = await h.layer.waitFor(TENANT, compensationId, 10_000);
    expect(compensation).toMatchObject({
      state: 'COMMITTED',
      compensates: id,
      idempotencyKey: `comp_${id}`,
    });
    expect(await h.layer.ledger.listOwedCompensations(TENANT)).toEqual([]);

    // Asking again (the call repeating itself) gives the same undo, not a second one.
    expect(
      await h.layer.compensate(
        { tenantId: TENANT, operationId: id },
        { action: 'cancel_booking', args: { booking_id: bookingId }, scope: h.scope() },
      ),
    ).toEqual({
      type: 'already_compensated',
      compensatedBy: compensationId,
    });
    await h.layer.compensationsNow();
    expect(
      await h.layer.ledger.rawField({ tenantId: TENANT, operationId: id }, 'compensation_owed'),
    ).toBeUndefined();
    const cancellations = await h.sandbox.effects({ tenant: TENANT, operation: 'cancel_booking' });
    expect(cancellations.map((e) => e.reference)).toEqual([compensationId]);
  });
});

describe('when a queued compensation is not started within its admission deadline', () => {
  it('should be owed again and admitted under the next key, cancelling the booking exactly once', async () => {
    const decision = await h.layer.admit({
      tenantId: QUEUED,
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
    const id = decision.operationId;
    const booked = await h.layer.waitFor(QUEUED, id, 10_000);
    const bookingId = String(booked?.result?.booking_id);
    const failedBefore = await compensationCount('cancel_booking', 'failed');

    await h.sandbox.addRule({
      fault: 'latency=1000',
      tenant: QUEUED,
      operation: 'cancel_booking',
      times: 1,
    });
    expect(
      (
        await h.layer.admit({
          tenantId: QUEUED,
          action: 'cancel_booking',
          args: { booking_id: 'bk_999998' },
          scope: h.scope(),
        })
      ).type,
    ).toBe('started');
    const undo = await h.layer.compensate(
      { tenantId: QUEUED, operationId: id },
      { action: 'cancel_booking', args: { booking_id: bookingId }, scope: h.scope() },
    );
    expect(undo).toMatchObject({ type: 'admitted', decision: { type: 'started', queued: true } });
    const firstTry = undo.type === 'admitted' ? undo.decision.operationId : '';

    // The first try waits behind the slow cancellation past its admission deadline: CANCELLED
    // without calling the provider, then owed again and admitted as comp_<id>_2.
    expect((await h.layer.waitFor(QUEUED, firstTry, 10_000))?.error?.code).toBe(
      'admission_deadline_passed',
    );
    // Tried again (as often as the action stays full) until one try runs and commits.
    const done = await waitFor(
      async () => {
        const linked = (await h.layer.ledger.get(QUEUED, id))?.compensatedBy;
        const op = linked === undefined ? undefined : await h.layer.ledger.get(QUEUED, linked);
        return op?.state === 'COMMITTED' ? op : undefined;
      },
      10_000,
      'a later try to commit',
    );
    expect(done.operationId).not.toBe(firstTry);
    expect(done.idempotencyKey).toMatch(new RegExp(`^comp_${id}_\\d+$`));
    const secondTry = done.operationId;
    const cancellations = await h.sandbox.effects({ tenant: QUEUED, operation: 'cancel_booking' });
    expect(cancellations.map((e) => e.reference)).toEqual([secondTry]);
    // A try that never started is no failure: nothing to alert on.
    expect(await compensationCount('cancel_booking', 'failed')).toBe(failedBefore);
  });
});
