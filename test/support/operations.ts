/** Builders for operations in ledger tests, and a ledger of a test file's own. */
import type { Redis } from 'ioredis';
import { ulid } from 'ulid';
import { afterAll } from 'vitest';
import { OperationLedger, type NewOperation } from '../../jobs/ledger/operation-ledger.ts';
import { deletePrefix, testRedis, uniquePrefix } from './redis.ts';

export function newOperation(overrides: Partial<NewOperation> = {}): NewOperation {
  const now = Date.now();
  return {
    operationId: `op_${ulid()}`,
    tenantId: 'demo',
    action: 'book_table',
    kind: 'mutation',
    provider: 'bookings',
    providerOperation: 'book_table',
    idempotencyKey: `idk_${ulid()}`,
    paramsHash: 'h1',
    params: { time: '21:00' },
    scope: {
      sessionId: 'sess-1',
      ownerGateway: 'gw-a',
      turnId: 'turn-1',
      providerCallId: 'call_1',
      goal: 'booking',
    },
    providerIdempotent: true,
    money: false,
    admissionDeadlineAt: now + 5_000,
    deadlineAt: now + 60_000,
    mode: 'mutation',
    capacity: -1,
    budgetWindowMs: 60_000,
    ...overrides,
  };
}

/**
 * A ledger on the run's Redis under a prefix of its own, for a test file: its keys are deleted
 * and its connection closed after the file's tests.
 */
export function testLedger(name: string): {
  readonly redis: Redis;
  readonly ledger: OperationLedger;
  readonly prefix: string;
} {
  const redis = testRedis();
  const prefix = uniquePrefix(name);
  const ledger = new OperationLedger(redis, { prefix, retentionDays: 7, moneyRetentionDays: 400 });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  return { redis, ledger, prefix };
}
