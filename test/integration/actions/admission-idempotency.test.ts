import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { IdempotencyConflictError } from '../../../jobs/ledger/ledger-errors.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tenants: { 'tenant-idem': { book_table: BOOK } } });
});
afterAll(async () => h.close());

describe('when the same booking is requested twice in one call', () => {
  it('should keep one operation and make one effect, answering the second with the first', async () => {
    const scope = h.scope({ providerCallId: 'call_A' });
    const args = booking();
    const first = await h.layer.admit({
      tenantId: 'tenant-idem',
      action: 'book_table',
      args,
      scope,
    });
    expect(first.type).toBe('started');
    // The model asks again with another call id and reordered, re-spaced arguments: same intent.
    const again = await h.layer.admit({
      tenantId: 'tenant-idem',
      action: 'book_table',
      args: Object.fromEntries(
        Object.entries(args)
          .reverse()
          .map(([k, v]) => [k, typeof v === 'string' ? `  ${v} ` : v]),
      ),
      scope: { ...scope, providerCallId: 'call_B' },
    });
    expect(again).toMatchObject({
      type: 'duplicate',
      operationId: first.type === 'started' ? first.operationId : '',
    });
    const op = await h.layer.waitFor(
      'tenant-idem',
      again.type === 'duplicate' ? again.operationId : '',
      10_000,
    );
    expect(op?.state).toBe('COMMITTED');
    expect(await h.sandbox.effects({ reference: op?.operationId ?? '' })).toHaveLength(1);
    const third = await h.layer.admit({
      tenantId: 'tenant-idem',
      action: 'book_table',
      args,
      scope,
    });
    expect(third).toEqual({ type: 'duplicate', operationId: op?.operationId, state: 'COMMITTED' });
    expect(await h.sandbox.effects({ tenant: 'tenant-idem', operation: 'book' })).toHaveLength(1);
  });

  it('should admit 50 concurrent identical requests as one operation with one effect', async () => {
    const scope = h.scope();
    const args = booking({ restaurant: 'bistro-nord' });
    const decisions = await Promise.all(
      Array.from({ length: 50 }, () =>
        h.layer.admit({ tenantId: 'tenant-idem', action: 'book_table', args, scope }),
      ),
    );
    const started = decisions.filter((d) => d.type === 'started');
    expect(started).toHaveLength(1);
    const ids = new Set(decisions.map((d) => ('operationId' in d ? d.operationId : '')));
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    const op = await h.layer.waitFor('tenant-idem', id ?? '', 10_000);
    expect(op?.state).toBe('COMMITTED');
    expect(await h.sandbox.effects({ reference: id ?? '' })).toHaveLength(1);
    expect((await h.sandbox.counts()).requests[id ?? '']).toBe(1);
  });
});

describe('when a key is reused with different parameters', () => {
  it('should refuse with a typed conflict and write nothing new', async () => {
    const scope = h.scope();
    const first = await h.layer.admit({
      tenantId: 'tenant-idem',
      action: 'book_table',
      args: booking({ time: '21:00' }),
      scope,
      idempotencyKey: 'dinner-tonight',
    });
    expect(first.type).toBe('started');
    const error = await h.layer
      .admit({
        tenantId: 'tenant-idem',
        action: 'book_table',
        args: booking({ time: '21:30' }),
        scope,
        idempotencyKey: 'dinner-tonight',
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    expect((error as IdempotencyConflictError).operationId).toBe(
      first.type === 'started' ? first.operationId : '',
    );
    expect(await h.layer.ledger.listBySession('tenant-idem', scope.sessionId)).toHaveLength(1);
  });
});

describe('when a request is malformed', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'an unknown tenant',
      { tenantId: 'nobody', action: 'book_table', args: {} },
      'CALLGATE_ERR_OP_UNKNOWN_TENANT',
    ],
    [
      'an unknown action',
      { tenantId: 'tenant-idem', action: 'launch_rocket', args: {} },
      'CALLGATE_ERR_OP_UNKNOWN_ACTION',
    ],
    [
      'arguments that are not an object',
      { tenantId: 'tenant-idem', action: 'book_table', args: ['x'] },
      'CALLGATE_ERR_OP_INVALID_ARGUMENTS',
    ],
    [
      'a non-finite number',
      { tenantId: 'tenant-idem', action: 'book_table', args: { party_size: Number.NaN } },
      'CALLGATE_ERR_OP_INVALID_ARGUMENTS',
    ],
    [
      'oversized arguments',
      { tenantId: 'tenant-idem', action: 'book_table', args: { name: 'x'.repeat(20_000) } },
      'CALLGATE_ERR_OP_PAYLOAD_TOO_LARGE',
    ],
    [
      'a session id BullMQ and Redis keys cannot carry',
      { tenantId: 'tenant-idem', action: 'book_table', args: {}, sessionId: 'a:b/c' },
      'CALLGATE_ERR_OP_INVALID_ID',
    ],
    [
      'an idempotency key with a colon',
      { tenantId: 'tenant-idem', action: 'book_table', args: {}, idempotencyKey: 'k:1' },
      'CALLGATE_ERR_OP_INVALID_ID',
    ],
  ];
  it.each(cases)(
    'should refuse %s with a typed error and write nothing',
    async (_name, request, code) => {
      const scope = h.scope(
        request.sessionId === undefined ? {} : { sessionId: request.sessionId as string },
      );
      const error = await h.layer
        .admit({
          tenantId: request.tenantId as string,
          action: request.action as string,
          args: request.args,
          scope,
          idempotencyKey: request.idempotencyKey as string | undefined,
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(isCallgateError(error, code as never), String(error)).toBe(true);
      expect(await h.layer.ledger.listBySession('tenant-idem', scope.sessionId)).toHaveLength(0);
    },
  );
});
