import { describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../../../jobs/ledger/ledger-errors.ts';
import {
  isLegalTransition,
  OPERATION_STATES,
  type OperationState,
} from '../../../jobs/ledger/operation.ts';
import { newOperation, testLedger } from '../../support/operations.ts';

const { redis, ledger } = testLedger('ledger');

/** Admits an operation and forces it into `state` (test setup only; the scripts are what is under test). */
async function inState(state: OperationState, attempt = 1) {
  const spec = newOperation();
  await ledger.admit(spec);
  await redis.hset(
    ledger.keys.operation(spec.tenantId, spec.operationId),
    'state',
    state,
    'attempt',
    String(attempt),
  );
  return ledger.require(spec.tenantId, spec.operationId);
}

describe('when an operation is admitted', () => {
  it('should be ADMITTED with REQUESTED and ADMITTED in its history and be found by id alone', async () => {
    const spec = newOperation();
    expect(await ledger.admit(spec)).toEqual({
      type: 'admitted',
      operationId: spec.operationId,
      activeBefore: 0,
    });
    const op = await ledger.getById(spec.operationId);
    expect(op).toMatchObject({
      state: 'ADMITTED',
      attempt: 0,
      sending: false,
      idempotencyKey: spec.idempotencyKey,
      params: { time: '21:00' },
    });
    expect(op?.scope).toMatchObject({
      sessionId: 'sess-1',
      ownerGateway: 'gw-a',
      turnId: 'turn-1',
      providerCallId: 'call_1',
      goal: 'booking',
    });
    const history = await ledger.history(spec.tenantId, spec.operationId);
    expect(history.map((h) => [h.state, h.actor])).toEqual([
      ['REQUESTED', 'admission'],
      ['ADMITTED', 'admission'],
    ]);
    expect(await ledger.outbox(spec.tenantId, Date.now() + 1)).toContain(spec.operationId);
    expect((await ledger.listBySession('demo', 'sess-1')).map((o) => o.operationId)).toContain(
      spec.operationId,
    );
  });
});

describe('when every pair of states is tried', () => {
  const pairs = OPERATION_STATES.filter((s) => s !== 'REQUESTED').flatMap((from) =>
    OPERATION_STATES.map((to) => [from, to] as const),
  );

  it.each(pairs)('should move %s -> %s only if the state machine allows it', async (from, to) => {
    const op = await inState(from);
    const attempt = op.attempt;
    const move = ledger.transition(op, {
      from: [from],
      to,
      attempt,
      actor: 'worker',
      reason: 'test',
    });
    if (isLegalTransition(from, to)) {
      await expect(move).resolves.toMatchObject({ attempt });
      const after = await ledger.require(op.tenantId, op.operationId);
      expect(after.state).toBe(to);
      expect((await ledger.history(op.tenantId, op.operationId)).at(-1)).toMatchObject({
        state: to,
        actor: 'worker',
        reason: 'test',
        attempt,
      });
    } else {
      await expect(move).rejects.toBeInstanceOf(IllegalTransitionError);
      expect((await ledger.require(op.tenantId, op.operationId)).state).toBe(from);
    }
  });

  it('should refuse a transition from a state the caller did not expect', async () => {
    const op = await inState('RUNNING');
    await expect(
      ledger.transition(op, {
        from: ['ADMITTED'],
        to: 'CANCELLED',
        actor: 'canceller',
        reason: 'x',
      }),
    ).rejects.toBeInstanceOf(IllegalTransitionError);
    expect((await ledger.require(op.tenantId, op.operationId)).state).toBe('RUNNING');
  });
});

describe('when a stale worker completes', () => {
  it('should refuse the completion, keep the state and count it', async () => {
    const op = await inState('RUNNING', 2);
    const before =
      (
        await registry.getSingleMetric('callgate_operation_stale_completions_total')?.get()
      )?.values.find((v) => v.labels.action === 'book_table')?.value ?? 0;
    await expect(
      ledger.transition(op, {
        from: ['RUNNING'],
        to: 'COMMITTED',
        attempt: 1,
        actor: 'worker',
        reason: 'late',
      }),
    ).rejects.toBeInstanceOf(StaleAttemptError);
    expect((await ledger.require(op.tenantId, op.operationId)).state).toBe('RUNNING');
    const after =
      (
        await registry.getSingleMetric('callgate_operation_stale_completions_total')?.get()
      )?.values.find((v) => v.labels.action === 'book_table')?.value ?? 0;
    expect(after).toBe(before + 1);
    await expect(ledger.setFenced(op, ['RUNNING'], 1, { sending: '1' })).rejects.toBeInstanceOf(
      StaleAttemptError,
    );
  });

  it('should increment the attempt when a new attempt begins, fencing out the previous one', async () => {
    const op = await inState('ADMITTED', 0);
    const first = await ledger.transition(op, {
      from: ['ADMITTED'],
      to: 'RUNNING',
      attempt: 0,
      newAttempt: true,
      actor: 'worker',
      reason: 'start',
    });
    expect(first.attempt).toBe(1);
    const running = await ledger.require(op.tenantId, op.operationId);
    await ledger.transition(running, {
      from: ['RUNNING'],
      to: 'FAILED_RETRYABLE',
      attempt: 1,
      actor: 'worker',
      reason: 'http_503',
    });
    const second = await ledger.transition(running, {
      from: ['FAILED_RETRYABLE'],
      to: 'RUNNING',
      attempt: 1,
      newAttempt: true,
      actor: 'worker',
      reason: 'retry',
    });
    expect(second.attempt).toBe(2);
    await expect(
      ledger.transition(running, {
        from: ['RUNNING'],
        to: 'COMMITTED',
        attempt: 1,
        actor: 'worker',
        reason: 'late',
      }),
    ).rejects.toBeInstanceOf(StaleAttemptError);
  });
});

describe('when an operation reaches a terminal state', () => {
  it('should append the result event to the owning gateway stream in the same step and leave the indexes', async () => {
    const op = await inState('RUNNING', 1);
    const stream = ledger.keys.results(op.tenantId, 'gw-a');
    const before = await redis.xlen(stream);
    const out = await ledger.transition(op, {
      from: ['RUNNING'],
      to: 'COMMITTED',
      attempt: 1,
      actor: 'worker',
      reason: 'ok',
      fields: { result: '{"booking_id":"b1"}' },
    });
    expect(out.eventId).toMatch(/^ev_/);
    expect(await redis.xlen(stream)).toBe(before + 1);
    const entries = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
    const fields: string[] = entries[0]?.[1] ?? [];
    const event: Record<string, string> = {};
    for (let i = 0; i < fields.length; i += 2) event[fields[i] ?? ''] = fields[i + 1] ?? '';
    expect(event).toMatchObject({
      event_id: out.eventId,
      operation_id: op.operationId,
      state: 'COMMITTED',
      session_id: 'sess-1',
      attempt: '1',
    });
    expect(await redis.zscore(ledger.keys.open(op.tenantId), op.operationId)).toBeNull();
    expect(
      await redis.zscore(ledger.keys.active(op.tenantId, op.action), op.operationId),
    ).toBeNull();
    const ttl = await redis.ttl(ledger.keys.operation(op.tenantId, op.operationId));
    expect(ttl).toBeGreaterThanOrEqual(7 * 86_400 - 5);
    expect((await ledger.require(op.tenantId, op.operationId)).result).toEqual({
      booking_id: 'b1',
    });
  });

  it('should keep money operations for the longer retention', async () => {
    const spec = newOperation({ money: true, action: 'refund' });
    await ledger.admit(spec);
    const op = await ledger.require(spec.tenantId, spec.operationId);
    await ledger.transition(op, {
      from: ['ADMITTED'],
      to: 'CANCELLED',
      actor: 'canceller',
      reason: 'caller',
    });
    expect(await redis.ttl(ledger.keys.operation(op.tenantId, op.operationId))).toBeGreaterThan(
      399 * 86_400,
    );
  });

  it('should list an UNKNOWN operation with the time it became UNKNOWN, and drop it once reconciled', async () => {
    const op = await inState('RUNNING', 1);
    const out = await ledger.transition(op, {
      from: ['RUNNING'],
      to: 'UNKNOWN',
      attempt: 1,
      actor: 'worker',
      reason: 'timeout_after_send',
    });
    expect(out.eventId).toBeDefined();
    expect((await ledger.listUnknown(op.tenantId)).map((u) => u.operation.operationId)).toContain(
      op.operationId,
    );
    await ledger.transition(op, {
      from: ['UNKNOWN'],
      to: 'COMMITTED',
      actor: 'reconciler',
      reason: 'lookup_committed',
    });
    expect(
      (await ledger.listUnknown(op.tenantId)).map((u) => u.operation.operationId),
    ).not.toContain(op.operationId);
  });
});
