import { describe, expect, it } from 'vitest';
import { FaultRuleBook } from '../../../jobs/providers/sandbox/fault-rule-book.ts';
import { FaultSpecError, parseFaultSpec } from '../../../jobs/providers/sandbox/fault-spec.ts';

describe('when a fault spec is parsed', () => {
  it.each([
    ['', {}],
    ['latency=250', { latencyMs: 250 }],
    ['error', { errorStatus: 503 }],
    ['error=500, commit-then-timeout', { errorStatus: 500, afterCommit: 'timeout' }],
    ['commit-then-timeout=1500', { afterCommit: 'timeout', holdMs: 1500 }],
    ['drop-after-commit', { afterCommit: 'drop' }],
    ['garbage-after-commit,drop-after-commit', { afterCommit: 'drop' }],
    ['drop-before-commit', { dropBeforeCommit: true }],
    ['cancel=off', { cancel: 'off' }],
    ['cancel=deferred,latency=10', { cancel: 'deferred', latencyMs: 10 }],
    ['lookup=processing', { lookup: 'processing' }],
  ])('should read %j', (text, expected) => {
    expect(parseFaultSpec(text)).toEqual(expected);
  });

  it.each([
    ['explode'],
    ['latency'],
    ['latency=-1'],
    ['latency=1.5'],
    ['latency=999999999'],
    ['error=404'],
    ['cancel=maybe'],
    ['lookup=fast'],
  ])('should refuse %j', (text) => {
    expect(() => parseFaultSpec(text)).toThrow(FaultSpecError);
  });
});

describe('when fault rules are matched', () => {
  const target = { service: 'payments', operation: 'refund', tenant: 'a' };

  it('should apply a rule without nth to every matching request and skip others', () => {
    const book = new FaultRuleBook();
    book.add({ service: 'payments', tenant: 'a', fault: 'latency=5' });
    expect(book.match(target)).toEqual({ latencyMs: 5 });
    expect(book.match({ ...target, tenant: 'b' })).toEqual({});
    expect(book.match({ ...target, service: 'bookings' })).toEqual({});
    expect(book.match(target)).toEqual({ latencyMs: 5 });
  });

  it('should apply nth and times to the matching requests in order', () => {
    const book = new FaultRuleBook();
    book.add({ operation: 'refund', nth: 2, times: 2, fault: 'error=500' });
    const applied = Array.from({ length: 5 }, () => book.match(target).errorStatus);
    expect(applied).toEqual([undefined, 500, 500, undefined, undefined]);
    expect(book.list()[0]).toMatchObject({ seen: 5, applied: 2 });
  });

  it('should merge several rules, later ones winning', () => {
    const book = new FaultRuleBook();
    book.add({ fault: 'latency=5,error=500' });
    book.add({ tenant: 'a', fault: 'error=502' });
    expect(book.match(target)).toEqual({ latencyMs: 5, errorStatus: 502 });
    book.clear();
    expect(book.match(target)).toEqual({});
  });
});
