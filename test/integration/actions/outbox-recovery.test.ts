import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paramsHash } from '../../../jobs/admission/idempotency.ts';
import { newOperationId } from '../../../jobs/ledger/operation-id.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';

let h: Harness;
beforeAll(async () => {
  // The sweep is run by hand here; its own timer is far away.
  h = await startHarness({ tenants: { 'tenant-outbox': { book_table: BOOK } }, worker: { sweepIntervalMs: 600_000 } });
});
afterAll(async () => h.close());

describe('when a process crashes between the ledger write and the enqueue', () => {
  it('should have the outbox sweep enqueue the admitted operation, which then runs exactly once', async () => {
    // What admission writes before it enqueues, and then nothing more: the crash.
    const args = booking();
    const operationId = newOperationId();
    const now = Date.now();
    const admitted = await h.layer.ledger.admit({
      operationId,
      tenantId: 'tenant-outbox',
      action: 'book_table',
      kind: 'mutation',
      provider: 'bookings',
      providerOperation: 'book',
      idempotencyKey: `idk_crash_${operationId.toLowerCase()}`,
      paramsHash: paramsHash(args),
      params: args,
      scope: h.scope(),
      providerIdempotent: true,
      money: false,
      admissionDeadlineAt: now + 60_000,
      deadlineAt: now + 120_000,
      mode: 'mutation',
      capacity: -1,
      budgetWindowMs: 60_000,
    });
    expect(admitted.type).toBe('admitted');
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect((await h.layer.ledger.get('tenant-outbox', operationId))?.state).toBe('ADMITTED');
    expect(await h.layer.queues.jobState('ops-mutations', operationId)).toBe('missing');

    await h.layer.sweepNow();
    const op = await h.layer.waitFor('tenant-outbox', operationId, 10_000);
    expect(op?.state).toBe('COMMITTED');
    // A second sweep finds nothing to do, and the effect exists once.
    await h.layer.sweepNow();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await h.sandbox.counts()).effects[operationId]).toBe(1);
    expect((await h.sandbox.counts()).requests[operationId]).toBe(1);
    expect(await h.layer.ledger.outbox('tenant-outbox', Date.now())).not.toContain(operationId);
  });
});
