import { describe, expect, it } from 'vitest';
import { newOperation, testLedger } from '../../support/operations.ts';

const { redis, ledger, prefix } = testLedger('ledger-pointer');

/** The global id -> tenant pointers under this file's prefix. */
async function pointers(): Promise<string[]> {
  return (await redis.keys(`${prefix}:optenant:*`)).sort();
}

describe('when the same request is admitted again', () => {
  it('should keep only the first operation pointer for duplicates of a mutation', async () => {
    const first = newOperation({ idempotencyKey: 'idk_dup' });
    expect(await ledger.admit(first)).toMatchObject({ type: 'admitted' });
    for (let i = 0; i < 5; i++) {
      expect(await ledger.admit(newOperation({ idempotencyKey: 'idk_dup' }))).toMatchObject({
        type: 'duplicate',
        operationId: first.operationId,
      });
    }
    expect(await pointers()).toEqual([ledger.keys.tenantOf(first.operationId)]);
    expect(await ledger.getById(first.operationId)).toMatchObject({
      operationId: first.operationId,
    });
    expect(await redis.ttl(ledger.keys.tenantOf(first.operationId))).toBeGreaterThan(0);
  });

  it('should leave no pointer for a read that joined a running one', async () => {
    const before = await pointers();
    const read = (): ReturnType<typeof newOperation> =>
      newOperation({
        kind: 'read',
        action: 'availability',
        mode: 'coalesce',
        coalesceKey: 'co_same',
      });
    const first = read();
    expect(await ledger.admit(first)).toMatchObject({ type: 'admitted' });
    const joined = read();
    expect(await ledger.admit(joined)).toMatchObject({
      type: 'coalesced',
      operationId: first.operationId,
    });
    expect(await redis.exists(ledger.keys.tenantOf(joined.operationId))).toBe(0);
    expect(await pointers()).toEqual([...before, ledger.keys.tenantOf(first.operationId)].sort());
  });
});
