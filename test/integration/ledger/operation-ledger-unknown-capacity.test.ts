import { describe, expect, it } from 'vitest';
import { newOperation, testLedger } from '../../support/operations.ts';

const { redis, ledger } = testLedger('ledger-unknown-cap');

/** Admits an operation under a capacity of one and runs it (the worker's first attempt). */
async function running(action: string) {
  const spec = newOperation({ action, capacity: 1 });
  expect(await ledger.admit(spec)).toMatchObject({ type: 'admitted' });
  let op = await ledger.require(spec.tenantId, spec.operationId);
  await ledger.transition(op, {
    from: ['ADMITTED'],
    to: 'RUNNING',
    actor: 'worker',
    reason: 'started',
    newAttempt: true,
  });
  op = await ledger.require(spec.tenantId, spec.operationId);
  return op;
}

describe('when an operation becomes UNKNOWN', () => {
  it('should leave the action capacity, so another operation is admitted, and be in the UNKNOWN index', async () => {
    const op = await running('refund_a');
    expect(await ledger.admit(newOperation({ action: 'refund_a', capacity: 1 }))).toMatchObject({
      type: 'full',
      active: 1,
    });
    await ledger.transition(op, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: op.attempt,
      actor: 'worker',
      reason: 'timeout',
    });
    expect(await redis.zcard(ledger.keys.active(op.tenantId, 'refund_a'))).toBe(0);
    expect(await redis.zscore(ledger.keys.unknown(op.tenantId), op.operationId)).not.toBeNull();
    expect(await ledger.admit(newOperation({ action: 'refund_a', capacity: 1 }))).toMatchObject({
      type: 'admitted',
      activeBefore: 0,
    });
  });

  it('should take its place under the capacity again when reconciliation sends it back to retry', async () => {
    const op = await running('refund_b');
    await ledger.transition(op, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: op.attempt,
      actor: 'worker',
      reason: 'timeout',
    });
    const unknown = await ledger.require(op.tenantId, op.operationId);
    await ledger.transition(unknown, {
      from: ['UNKNOWN'],
      to: 'UNKNOWN',
      actor: 'reconciler',
      reason: 'still_processing',
    });
    expect(await redis.zcard(ledger.keys.active(op.tenantId, 'refund_b'))).toBe(0);
    await ledger.transition(unknown, {
      from: ['UNKNOWN'],
      to: 'FAILED_RETRYABLE',
      actor: 'reconciler',
      reason: 'reconciled_not_found',
    });
    // Back in the capacity set with its admission time as score; the UNKNOWN index lets it go.
    expect(await redis.zscore(ledger.keys.active(op.tenantId, 'refund_b'), op.operationId)).toBe(
      String(op.admittedAt),
    );
    expect(await redis.zscore(ledger.keys.unknown(op.tenantId), op.operationId)).toBeNull();
    expect(await ledger.admit(newOperation({ action: 'refund_b', capacity: 1 }))).toMatchObject({
      type: 'full',
      active: 1,
    });
  });

  it('should not come back under the capacity when reconciliation ends it', async () => {
    const op = await running('refund_c');
    await ledger.transition(op, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: op.attempt,
      actor: 'worker',
      reason: 'timeout',
    });
    const unknown = await ledger.require(op.tenantId, op.operationId);
    await ledger.transition(unknown, {
      from: ['UNKNOWN'],
      to: 'COMMITTED',
      actor: 'reconciler',
      reason: 'reconciled_committed',
    });
    expect(await redis.zcard(ledger.keys.active(op.tenantId, 'refund_c'))).toBe(0);
    expect(await redis.zscore(ledger.keys.open(op.tenantId), op.operationId)).toBeNull();
  });
});
