/**
 * Races around one compensation, driven step by step: the owed-compensation pass runs only when
 * the test calls it (its timer is set far off), so each interleaving happens in the order written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compensationKey } from '../../../jobs/compensation/compensator.ts';
import {
  BOOK,
  booking,
  CANCEL_BOOKING,
  startHarness,
  type Harness,
} from '../../support/action-harness.ts';
import { compensationCount } from '../../support/compensation-metrics.ts';

const TENANT = 'tenant-undo-races';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        cancel_booking: {
          ...CANCEL_BOOKING,
          retry: { maxAttempts: 2, backoffMs: 20, maxBackoffMs: 40 },
        },
      },
    },
    worker: { sweepIntervalMs: 600_000 },
  });
});
afterAll(async () => h.close());

async function committedBooking(): Promise<{
  id: string;
  request: { action: string; args: Record<string, unknown>; scope: ReturnType<Harness['scope']> };
}> {
  const decision = await h.layer.admit({
    tenantId: TENANT,
    action: 'book_table',
    args: booking(),
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
  const op = await h.layer.waitFor(TENANT, decision.operationId, 10_000);
  return {
    id: decision.operationId,
    request: {
      action: 'cancel_booking',
      args: { booking_id: String(op?.result?.booking_id) },
      scope: h.scope(),
    },
  };
}

/** A compensation of `id` that ended FAILED_FINAL while linked (the bookings service refused both attempts). */
async function failedCompensation(
  id: string,
  request: Awaited<ReturnType<typeof committedBooking>>['request'],
): Promise<string> {
  await h.sandbox.addRule({
    fault: 'error=503',
    tenant: TENANT,
    operation: 'cancel_booking',
    times: 2,
  });
  const decision = await h.layer.compensate({ tenantId: TENANT, operationId: id }, request);
  if (decision.type !== 'admitted') throw new Error(`not admitted: ${decision.type}`);
  expect((await h.layer.waitFor(TENANT, decision.decision.operationId, 10_000))?.state).toBe(
    'FAILED_FINAL',
  );
  return decision.decision.operationId;
}

describe('when the admission of an owed compensation is lost before it was linked', () => {
  it('should be linked by the pass to the operation that was admitted, not admitted twice', async () => {
    const { id, request } = await committedBooking();
    // The gateway recorded the undo as owed and admitted it, then died before linking it.
    await h.layer.ledger.oweCompensation(
      { tenantId: TENANT, operationId: id },
      JSON.stringify(request),
    );
    const admitted = await h.layer.admit({
      ...request,
      tenantId: TENANT,
      compensates: id,
      idempotencyKey: compensationKey(id, 0),
    });
    if (admitted.type !== 'started') throw new Error(`not started: ${admitted.type}`);
    expect((await h.layer.waitFor(TENANT, admitted.operationId, 10_000))?.state).toBe('COMMITTED');

    expect(await h.layer.compensationsNow()).toMatchObject({ admitted: 1 });
    expect((await h.layer.ledger.get(TENANT, id))?.compensatedBy).toBe(admitted.operationId);
    expect(await h.layer.compensationsNow()).toMatchObject({ settled: 1 });
    expect(
      await h.sandbox.effects({
        tenant: TENANT,
        operation: 'cancel_booking',
        reference: admitted.operationId,
      }),
    ).toHaveLength(1);
    expect(await h.layer.ledger.listOwedCompensations(TENANT)).toEqual([]);
  });
});

describe('when several workers settle the same failed compensation at once', () => {
  it('should release the link exactly once, leaving nothing for a later pass to count', async () => {
    const { id, request } = await committedBooking();
    const failedId = await failedCompensation(id, request);
    const before = await compensationCount('cancel_booking', 'failed');
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => h.layer.ledger.settleCompensation(TENANT, id)),
    );
    expect(outcomes.filter((o) => o.type === 'released')).toEqual([
      {
        type: 'released',
        compensationId: failedId,
        action: 'cancel_booking',
        state: 'FAILED_FINAL',
        tries: 1,
      },
    ]);
    // The pass that comes after finds nothing left to settle.
    expect(await h.layer.compensationsNow()).toMatchObject({ failed: 0 });
    expect(await compensationCount('cancel_booking', 'failed')).toBe(before);
  });
});

describe('when an undo is admitted with a key read before the last try was settled', () => {
  it('should not link the failed try again, but admit the next one', async () => {
    const { id, request } = await committedBooking();
    const failedId = await failedCompensation(id, request);
    expect(await h.layer.compensationsNow()).toMatchObject({ failed: 1 });

    // Re-owed with the tries read before the release (0): its key is the failed try's.
    await h.layer.ledger.oweCompensation(
      { tenantId: TENANT, operationId: id },
      JSON.stringify(request),
    );
    const decision = await h.layer.compensator.admitOwed(TENANT, id, request, 0);
    expect(decision.type).toBe('admitted');
    const retriedId = decision.type === 'admitted' ? decision.decision.operationId : '';
    expect(retriedId).not.toBe(failedId);
    expect((await h.layer.waitFor(TENANT, retriedId, 10_000))?.idempotencyKey).toBe(
      compensationKey(id, 1),
    );
    expect((await h.layer.ledger.get(TENANT, id))?.compensatedBy).toBe(retriedId);
  });
});
