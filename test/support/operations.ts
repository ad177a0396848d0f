/** Builders for operations in ledger tests. */
import { ulid } from 'ulid';
import type { NewOperation } from '../../jobs/ledger/operation-ledger.ts';

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
    scope: { sessionId: 'sess-1', ownerGateway: 'gw-a', turnId: 'turn-1', providerCallId: 'call_1', goal: 'booking' },
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
