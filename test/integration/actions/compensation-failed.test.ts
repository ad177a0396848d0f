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

const TENANT = 'tenant-undo-fails';
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        // Two attempts, quickly: a compensation against a failing provider ends FAILED_FINAL in well under a second.
        cancel_booking: {
          ...CANCEL_BOOKING,
          retry: { maxAttempts: 2, backoffMs: 20, maxBackoffMs: 40 },
        },
      },
    },
  });
});
afterAll(async () => h.close());

async function committedBooking(): Promise<{ id: string; bookingId: string }> {
  const decision = await h.layer.admit({
    tenantId: TENANT,
    action: 'book_table',
    args: booking(),
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
  const op = await h.layer.waitFor(TENANT, decision.operationId, 10_000);
  expect(op?.state).toBe('COMMITTED');
  return { id: decision.operationId, bookingId: String(op?.result?.booking_id) };
}

function admittedId(decision: Awaited<ReturnType<Harness['layer']['compensate']>>): string {
  if (decision.type !== 'admitted') throw new Error(`compensation not admitted: ${decision.type}`);
  return decision.decision.operationId;
}

describe('when a compensation fails for good', () => {
  it('should release the link on the original, count the failure, and let a second undo cancel the booking once', async () => {
    const { id, bookingId } = await committedBooking();
    const scope = h.scope();
    const failedBefore = await compensationCount('cancel_booking', 'failed');
    // The system of record refuses both attempts of the first undo.
    await h.sandbox.addRule({
      fault: 'error=503',
      tenant: TENANT,
      operation: 'cancel_booking',
      times: 2,
    });

    const firstId = admittedId(
      await h.layer.compensate(
        { tenantId: TENANT, operationId: id },
        { action: 'cancel_booking', args: { booking_id: bookingId }, scope },
      ),
    );
    const first = await h.layer.waitFor(TENANT, firstId, 10_000);
    expect(first?.state).toBe('FAILED_FINAL');

    // The link is released, so the undo can be asked for again; the failed try stays on record.
    await waitFor(
      async () =>
        (await h.layer.ledger.get(TENANT, id))?.compensatedBy === undefined ? true : undefined,
      5_000,
      'the link to be released',
    );
    expect(
      await h.layer.ledger.rawField({ tenantId: TENANT, operationId: id }, 'compensation_failed'),
    ).toBe(firstId);
    expect(await compensationCount('cancel_booking', 'failed')).toBe(failedBefore + 1);
    expect(await h.sandbox.effects({ tenant: TENANT, operation: 'cancel_booking' })).toHaveLength(
      0,
    );

    const second = await h.layer.compensate(
      { tenantId: TENANT, operationId: id },
      { action: 'cancel_booking', args: { booking_id: bookingId }, scope },
    );
    const secondId = admittedId(second);
    expect(secondId).not.toBe(firstId);
    expect(second.type === 'admitted' && second.decision.type).toBe('started');
    expect((await h.layer.waitFor(TENANT, secondId, 10_000))?.state).toBe('COMMITTED');
    expect((await h.layer.ledger.get(TENANT, secondId))?.idempotencyKey).toBe(`comp_${id}_2`);
    await waitFor(
      async () =>
        (await h.layer.ledger.listCompensationsInFlight(TENANT)).length === 0 ? true : undefined,
      5_000,
      'the second undo to settle',
    );
    expect((await h.layer.ledger.get(TENANT, id))?.compensatedBy).toBe(secondId);
    expect(await h.sandbox.effects({ tenant: TENANT, operation: 'cancel_booking' })).toHaveLength(
      1,
    );
    // Counted once, however many passes looked at it.
    expect(await compensationCount('cancel_booking', 'failed')).toBe(failedBefore + 1);
  });
});
