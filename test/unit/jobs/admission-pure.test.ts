import { describe, expect, it } from 'vitest';
import {
  admissionMode,
  capacityFor,
  decideWhenFull,
} from '../../../jobs/admission/backpressure.ts';
import {
  canonicalJson,
  deriveCoalesceKey,
  deriveIdempotencyKey,
  normalizeArguments,
} from '../../../jobs/admission/idempotency.ts';
import { decideRetry } from '../../../jobs/execution/retry-policy.ts';

describe('when arguments are normalized', () => {
  it.each([
    [{ b: 1, a: 2 }, '{"a":2,"b":1}'],
    [{ name: '  Ada   Lovelace ' }, '{"name":"Ada Lovelace"}'],
    [{ x: undefined, y: null }, '{"y":null}'],
    [{ n: -0 }, '{"n":0}'],
    [{ list: [{ z: 1, a: 'é' }] }, '{"list":[{"a":"é","z":1}]}'],
    [{ cafe: 'cafe\u0301' }, '{"cafe":"café"}'],
    [{ Case: 'ABC' }, '{"Case":"ABC"}'],
  ])('should give %j the canonical form %s', (input, expected) => {
    expect(canonicalJson(input)).toBe(expected);
  });

  it.each([
    [{ n: Number.NaN }],
    [{ n: Number.POSITIVE_INFINITY }],
    [{ f: () => 1 }],
    [{ s: Symbol('x') }],
    [{ b: 10n }],
  ])('should refuse %s', (input) => {
    expect(() => normalizeArguments(input)).toThrow(TypeError);
  });
});

describe('when idempotency keys are derived', () => {
  const scope = { tenantId: 'demo', action: 'book_table', sessionId: 's1' };
  it('should give the same key for the same intent however the model phrased the arguments', () => {
    expect(deriveIdempotencyKey(scope, { time: '21:00', party: 2 })).toBe(
      deriveIdempotencyKey(scope, { party: 2, time: ' 21:00 ' }),
    );
  });
  it('should give another key for another tenant, action, call or arguments', () => {
    const key = deriveIdempotencyKey(scope, { time: '21:00' });
    expect(deriveIdempotencyKey({ ...scope, tenantId: 'other' }, { time: '21:00' })).not.toBe(key);
    expect(deriveIdempotencyKey({ ...scope, action: 'refund' }, { time: '21:00' })).not.toBe(key);
    expect(deriveIdempotencyKey({ ...scope, sessionId: 's2' }, { time: '21:00' })).not.toBe(key);
    expect(deriveIdempotencyKey(scope, { time: '21:30' })).not.toBe(key);
  });
  it('should make keys BullMQ and Redis accept (no colon, not numeric, bounded)', () => {
    const key = deriveIdempotencyKey(scope, { a: 1 });
    expect(key).toMatch(/^idk_[0-9a-f]{40}$/);
    expect(deriveCoalesceKey('demo', 'check_availability', { a: 1 })).toMatch(/^co_[0-9a-f]{40}$/);
  });
});

describe('when backpressure is decided', () => {
  const base = { maxConcurrent: 2, maxQueued: 3, admissionDeadlineMs: 1000, fallback: 'later' };
  it.each([
    ['reject', 2, { type: 'busy', reason: 'at_capacity', retryAfterMs: 1000 }],
    ['queue', 5, { type: 'busy', reason: 'queue_full', retryAfterMs: 1000 }],
    ['coalesce', 5, { type: 'busy', reason: 'queue_full', retryAfterMs: 1000 }],
    ['degrade', 5, { type: 'degraded', fallback: 'later' }],
  ] as const)(
    'should give %s a capacity of %i and a typed answer when full',
    (policy, capacity, whenFull) => {
      expect(capacityFor({ ...base, policy })).toBe(capacity);
      expect(decideWhenFull({ ...base, policy })).toEqual(whenFull);
    },
  );
  it.each([
    ['mutation', 'queue', 'mutation'],
    ['mutation', 'reject', 'mutation'],
    ['read', 'coalesce', 'coalesce'],
    ['read', 'queue', 'read'],
    ['read', 'degrade', 'read'],
  ] as const)('should admit a %s under %s in %s mode', (kind, policy, mode) => {
    expect(admissionMode({ kind, policy })).toBe(mode);
  });
});

describe('when a retry is decided', () => {
  const retry = { maxAttempts: 4, backoffMs: 100, maxBackoffMs: 1000 };
  it('should grow the bound exponentially with full jitter, never below the base', () => {
    expect(decideRetry(retry, 1, 0, 1e9, () => 0.999)).toEqual({ retry: true, delayMs: 100 });
    expect(decideRetry(retry, 2, 0, 1e9, () => 0.999)).toEqual({ retry: true, delayMs: 200 });
    expect(decideRetry(retry, 3, 0, 1e9, () => 0.999)).toEqual({ retry: true, delayMs: 400 });
    expect(decideRetry(retry, 3, 0, 1e9, () => 0)).toEqual({ retry: true, delayMs: 100 });
    expect(decideRetry({ ...retry, maxAttempts: 10 }, 8, 0, 1e9, () => 0.999)).toEqual({
      retry: true,
      delayMs: 999,
    });
  });
  it('should stop at the attempt limit and before the deadline', () => {
    expect(decideRetry(retry, 4, 0, 1e9)).toEqual({ retry: false, reason: 'attempts_exhausted' });
    expect(decideRetry(retry, 1, 1000, 1050, () => 0.5)).toEqual({
      retry: false,
      reason: 'deadline',
    });
  });
});
