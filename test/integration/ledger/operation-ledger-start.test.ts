import { describe, expect, it } from 'vitest';
import { leaseHolder } from '../../../jobs/ledger/keys.ts';
import { newOperation, testLedger } from '../../support/operations.ts';

const { redis, ledger } = testLedger('ledger-start');

const LEASE = { ttlMs: 60_000, max: 2, maxAttempts: 5 };

async function admitted(overrides: Parameters<typeof newOperation>[0] = {}) {
  const spec = newOperation(overrides);
  await ledger.admit(spec);
  return spec;
}

function start(
  spec: { tenantId: string; operationId: string; action: string },
  provider = 'bookings',
) {
  return ledger.start(
    { tenantId: spec.tenantId, operationId: spec.operationId, action: spec.action },
    provider,
    LEASE,
  );
}

describe('when a worker starts an admitted operation in the step that reads it', () => {
  it('should return it RUNNING at attempt 1, marked sending, with a lease of attempt 1 and a history entry', async () => {
    const spec = await admitted({ tenantId: 'start-a' });
    const before = await ledger.time();
    const outcome = await start(spec);
    const after = await ledger.time();
    expect(outcome.type).toBe('started');
    if (outcome.type !== 'started') return;
    const now = outcome.operation.startedAt ?? 0;
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(after);
    expect(outcome.operation).toMatchObject({
      operationId: spec.operationId,
      state: 'RUNNING',
      attempt: 1,
      sending: true,
      sendingAt: now,
      params: { time: '21:00' },
    });
    expect(outcome.operation.attemptTokens).toEqual([outcome.operation.attemptToken]);
    expect(await ledger.require(spec.tenantId, spec.operationId)).toEqual(outcome.operation);
    expect(
      await redis.zrange(ledger.keys.lease(spec.tenantId, spec.action), 0, -1, 'WITHSCORES'),
    ).toEqual([leaseHolder(spec.operationId, 1), String(now + LEASE.ttlMs)]);
    expect((await ledger.history(spec.tenantId, spec.operationId)).at(-1)).toMatchObject({
      state: 'RUNNING',
      attempt: 1,
      actor: 'worker',
      reason: 'started',
    });
  });

  it('should begin attempt 2 as a retry from FAILED_RETRYABLE, keeping the first start time', async () => {
    const spec = await admitted({ tenantId: 'start-b' });
    const first = await start(spec);
    if (first.type !== 'started') throw new Error(first.type);
    await ledger.transition(first.operation, {
      from: ['RUNNING'],
      to: 'FAILED_RETRYABLE',
      attempt: 1,
      actor: 'worker',
      reason: 'test',
    });
    await ledger.releaseLease(spec.tenantId, spec.action, leaseHolder(spec.operationId, 1));
    const retry = await start(spec);
    expect(retry).toMatchObject({
      type: 'started',
      operation: { state: 'RUNNING', attempt: 2, startedAt: first.operation.startedAt },
    });
    if (retry.type !== 'started') return;
    expect(retry.operation.attemptToken).not.toBe(first.operation.attemptToken);
    expect(retry.operation.attemptTokens).toEqual([
      first.operation.attemptToken,
      retry.operation.attemptToken,
    ]);
    expect((await ledger.history(spec.tenantId, spec.operationId)).at(-1)).toMatchObject({
      state: 'RUNNING',
      attempt: 2,
      reason: 'retry',
    });
  });
});

describe('when the operation is not due to start here', () => {
  it.each([
    ['past its admission deadline', { admissionDeadlineAt: Date.now() - 1 }, 'bookings'],
    ['bound to another provider', {}, 'payments'],
  ])('should change nothing when %s and return it as it is', async (_what, overrides, provider) => {
    const spec = await admitted({ tenantId: 'start-c', ...overrides });
    const outcome = await start(spec, provider);
    expect(outcome).toMatchObject({
      type: 'as_is',
      operation: { state: 'ADMITTED', attempt: 0, sending: false },
    });
    expect(await redis.zcard(ledger.keys.lease(spec.tenantId, spec.action))).toBe(0);
    expect((await ledger.history(spec.tenantId, spec.operationId)).map((h) => h.state)).toEqual([
      'REQUESTED',
      'ADMITTED',
    ]);
  });

  it('should return a RUNNING operation as it is (a redelivered job), taking no second attempt', async () => {
    const spec = await admitted({ tenantId: 'start-d' });
    await start(spec);
    expect(await start(spec)).toMatchObject({
      type: 'as_is',
      operation: { state: 'RUNNING', attempt: 1 },
    });
  });

  it('should answer not_found for an operation that does not exist', async () => {
    expect(
      await start({ tenantId: 'start-e', operationId: 'op_missing', action: 'book_table' }),
    ).toEqual({ type: 'not_found' });
  });
});

describe('when the operation has used every attempt the retry policy allows', () => {
  it('should not begin another attempt and return it as it is', async () => {
    const spec = await admitted({ tenantId: 'start-g' });
    const limits = { ...LEASE, maxAttempts: 1 };
    const first = await ledger.start(spec, 'bookings', limits);
    if (first.type !== 'started') throw new Error(first.type);
    await ledger.transition(first.operation, {
      from: ['RUNNING'],
      to: 'FAILED_RETRYABLE',
      attempt: 1,
      actor: 'worker',
      reason: 'test',
      lease: { mode: 'release' },
    });
    expect(await ledger.start(spec, 'bookings', limits)).toMatchObject({
      type: 'as_is',
      operation: { state: 'FAILED_RETRYABLE', attempt: 1 },
    });
    expect(await redis.zcard(ledger.keys.lease(spec.tenantId, spec.action))).toBe(0);
  });
});

describe('when every lease of the action is taken', () => {
  it('should answer no_lease and leave the operation ADMITTED at attempt 0', async () => {
    const specs = await Promise.all([1, 2, 3].map(() => admitted({ tenantId: 'start-f' })));
    const [a, b, c] = specs as [(typeof specs)[0], (typeof specs)[0], (typeof specs)[0]];
    expect((await start(a)).type).toBe('started');
    expect((await start(b)).type).toBe('started');
    expect(await start(c)).toEqual({ type: 'no_lease' });
    expect(await ledger.require(c.tenantId, c.operationId)).toMatchObject({
      state: 'ADMITTED',
      attempt: 0,
      sending: false,
    });
  });
});
