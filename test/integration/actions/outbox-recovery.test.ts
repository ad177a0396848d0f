import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paramsHash } from '../../../jobs/admission/idempotency.ts';
import { Logger } from '../../../config/log.ts';
import { newOperationId } from '../../../jobs/ledger/operation-id.ts';
import { bullPrefix } from '../../../jobs/queues/operation-queues.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';
import { testRedis } from '../../support/redis.ts';

let h: Harness;
beforeAll(async () => {
  // The sweep is run by hand here; its own timer is far away.
  h = await startHarness({
    tenants: { 'tenant-outbox': { book_table: BOOK } },
    worker: { sweepIntervalMs: 600_000 },
  });
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

describe('when the enqueue fails after the ledger admitted the operation', () => {
  let failing: Harness;
  const logged: string[] = [];
  beforeAll(async () => {
    failing = await startHarness({
      tenants: { 'tenant-enqueue': { book_table: BOOK } },
      worker: { sweepIntervalMs: 600_000 },
      log: new Logger({ level: 'warn', sink: { write: (line: string) => void logged.push(line) } }),
    });
  });
  afterAll(async () => failing.close());

  it('should answer started, keep the operation in the outbox, and have the sweep run it once', async () => {
    // BullMQ counts every job it adds in the queue's id key: a key that is not a number makes
    // Redis refuse the add, a real enqueue failure after the ledger write.
    const redis = testRedis();
    const idKey = `${bullPrefix(failing.prefix)}:ops-mutations:id`;
    await redis.set(idKey, 'not-a-number');
    try {
      const decision = await failing.layer.admit({
        tenantId: 'tenant-enqueue',
        action: 'book_table',
        args: booking(),
        scope: failing.scope(),
      });
      expect(decision.type).toBe('started');
      if (decision.type !== 'started') return;
      await failing.layer.admission.drain();
      expect(
        logged.some(
          (line) => line.includes('enqueue failed') && line.includes(decision.operationId),
        ),
      ).toBe(true);
      expect((await failing.layer.get('tenant-enqueue', decision.operationId)).state).toBe(
        'ADMITTED',
      );
      expect(await failing.layer.queues.jobState('ops-mutations', decision.operationId)).toBe(
        'missing',
      );
      expect(await failing.layer.ledger.outbox('tenant-enqueue', Date.now())).toContain(
        decision.operationId,
      );

      await redis.del(idKey);
      await new Promise((resolve) => setTimeout(resolve, 1_200)); // past the outbox's settle time
      await failing.layer.sweepNow();
      const op = await failing.layer.waitFor('tenant-enqueue', decision.operationId, 10_000);
      expect(op?.state).toBe('COMMITTED');
      expect((await failing.sandbox.counts()).requests[decision.operationId]).toBe(1);
      expect(await failing.layer.ledger.outbox('tenant-enqueue', Date.now())).not.toContain(
        decision.operationId,
      );
    } finally {
      await redis.del(idKey);
      redis.disconnect();
    }
  });
});
