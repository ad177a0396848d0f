import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BOOK,
  booking,
  CANCEL_BOOKING,
  REFUND,
  startHarness,
  type Harness,
} from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      'tenant-queued': { book_table: { ...BOOK, maxConcurrent: 1 } },
      'tenant-running': { book_table: { ...BOOK }, cancel_booking: CANCEL_BOOKING },
      'tenant-nocancel': { refund: { ...REFUND, provider: 'payments_nocancel' } },
      'tenant-done': { book_table: { ...BOOK }, cancel_booking: CANCEL_BOOKING },
    },
    providers: (url) => ({
      payments_nocancel: {
        type: 'http',
        baseUrl: `${url}/payments`,
        honoursIdempotencyKeys: false,
        supportsCancel: false,
      },
    }),
  });
});
afterAll(async () => h.close());

async function started(
  tenantId: string,
  action: string,
  args: Record<string, unknown>,
): Promise<string> {
  const decision = await h.layer.admit({ tenantId, action, args, scope: h.scope() });
  if (decision.type !== 'started') throw new Error(`not started: ${decision.type}`);
  return decision.operationId;
}

describe('when an operation is cancelled while queued', () => {
  it('should be CANCELLED at once and the provider never called', async () => {
    await h.sandbox.addRule({ fault: 'latency=800', tenant: 'tenant-queued' });
    const running = await started('tenant-queued', 'book_table', booking());
    const queued = await started('tenant-queued', 'book_table', booking());
    expect(await h.layer.cancel('tenant-queued', queued)).toEqual({
      type: 'cancelled',
      operationId: queued,
    });
    expect((await h.layer.waitFor('tenant-queued', running, 10_000))?.state).toBe('COMMITTED');
    expect((await h.layer.ledger.get('tenant-queued', queued))?.state).toBe('CANCELLED');
    expect((await h.sandbox.counts()).requests[queued]).toBeUndefined();
  });
});

describe('when an operation is cancelled while running at a provider that can cancel', () => {
  it('should report requested, and CANCELLED only once the provider confirms, with no effect', async () => {
    await h.sandbox.addRule({
      fault: 'latency=1500,cancel=on',
      tenant: 'tenant-running',
      operation: 'book',
    });
    const id = await started('tenant-running', 'book_table', booking());
    await waitFor(
      async () => ((await h.layer.ledger.get('tenant-running', id))?.sending ? true : undefined),
      5_000,
      'the request to be sent',
    );
    const decision = await h.layer.cancel('tenant-running', id);
    expect(decision).toEqual({ type: 'requested', operationId: id });
    // Requested is not cancelled: the ledger says so only after the provider confirmed.
    const op = await h.layer.waitFor('tenant-running', id, 10_000);
    expect(op?.state).toBe('CANCELLED');
    const reasons = (await h.layer.ledger.history('tenant-running', id)).map((e) => e.reason);
    expect(
      reasons.some((r) => r === 'provider_confirmed_cancel' || r === 'cancelled_by_provider'),
    ).toBe(true);
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(0);
  });
});

describe('when an operation is cancelled while running at a provider that cannot cancel', () => {
  it('should stay RUNNING, tell the caller, and commit as the provider decides', async () => {
    await h.sandbox.addRule({
      fault: 'latency=600',
      tenant: 'tenant-nocancel',
      operation: 'refund',
    });
    const id = await started('tenant-nocancel', 'refund', {
      order_id: 'ord_1010',
      amount_cents: 100,
    });
    await waitFor(
      async () =>
        (await h.layer.ledger.get('tenant-nocancel', id))?.state === 'RUNNING' ? true : undefined,
      5_000,
      'RUNNING',
    );
    expect(await h.layer.cancel('tenant-nocancel', id)).toEqual({
      type: 'not_cancellable',
      operationId: id,
      state: 'RUNNING',
      reason: 'running_without_cancel',
    });
    expect((await h.layer.waitFor('tenant-nocancel', id, 10_000))?.state).toBe('COMMITTED');
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(1);
  });
});

describe('when a committed booking is to be undone', () => {
  it('should say cancel is too late, and compensate with a new operation linked both ways, once', async () => {
    const id = await started('tenant-done', 'book_table', booking());
    const booked = await h.layer.waitFor('tenant-done', id, 10_000);
    expect(booked?.state).toBe('COMMITTED');
    expect(await h.layer.cancel('tenant-done', id)).toMatchObject({
      type: 'committed',
      operationId: id,
    });
    const bookingId = booked?.result?.booking_id;
    expect(typeof bookingId).toBe('string');
    const scope = h.scope();
    const first = await h.layer.compensate(
      { tenantId: 'tenant-done', operationId: id },
      { action: 'cancel_booking', args: { booking_id: bookingId }, scope },
    );
    expect(first.type).toBe('admitted');
    const compensationId =
      first.type === 'admitted' && 'operationId' in first.decision
        ? first.decision.operationId
        : '';
    const compensation = await h.layer.waitFor('tenant-done', compensationId, 10_000);
    expect(compensation?.state).toBe('COMMITTED');
    expect(compensation?.compensates).toBe(id);
    expect((await h.layer.ledger.get('tenant-done', id))?.compensatedBy).toBe(compensationId);
    // Asking again does not undo twice.
    expect(
      await h.layer.compensate(
        { tenantId: 'tenant-done', operationId: id },
        { action: 'cancel_booking', args: { booking_id: bookingId }, scope },
      ),
    ).toEqual({
      type: 'already_compensated',
      compensatedBy: compensationId,
    });
    expect(
      await h.sandbox.effects({ tenant: 'tenant-done', operation: 'cancel_booking' }),
    ).toHaveLength(1);
    // The original stays COMMITTED: the ledger records what happened, and what undid it.
    expect((await h.layer.ledger.get('tenant-done', id))?.state).toBe('COMMITTED');
  });

  it('should answer a second cancel with the final state, and refuse to compensate what never committed', async () => {
    await h.sandbox.addRule({ fault: 'latency=600', tenant: 'tenant-queued' });
    const running = await started('tenant-queued', 'book_table', booking());
    const queued = await started('tenant-queued', 'book_table', booking());
    expect(await h.layer.cancel('tenant-queued', queued)).toEqual({
      type: 'cancelled',
      operationId: queued,
    });
    expect(await h.layer.cancel('tenant-queued', queued)).toEqual({
      type: 'already_final',
      operationId: queued,
      state: 'CANCELLED',
    });
    expect(
      await h.layer.compensate(
        { tenantId: 'tenant-queued', operationId: queued },
        { action: 'book_table', args: booking(), scope: h.scope() },
      ),
    ).toEqual({
      type: 'not_committed',
      state: 'CANCELLED',
    });
    await h.layer.waitFor('tenant-queued', running, 10_000);
  });
});
