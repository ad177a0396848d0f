import { describe, expect, it } from 'vitest';
import { intentFieldsOf } from '../../../jobs/admission/admission.ts';
import {
  deriveIdempotencyKey,
  intentOf,
  paramsHashOf,
  type IntentFields,
} from '../../../jobs/admission/idempotency.ts';

const scope = { tenantId: 'demo', action: 'refund', sessionId: 'call-1' };
const REFUND: IntentFields = ['order_id', 'amount_cents'];
const BOOKING: IntentFields = ['restaurant', 'date', 'time', 'party_size'];
const refund = { order_id: 'ord_1001', amount_cents: 1500, reason: 'the soup was cold' };
const table = {
  restaurant: 'sushi-kaito',
  date: '2031-05-01',
  time: '19:00',
  party_size: 2,
  name: 'Ada Lovelace',
};

/** Key and conflict hash of a request, as admission derives them. */
function identity(
  fields: IntentFields,
  args: Record<string, unknown>,
): { key: string; hash: string } {
  return {
    key: deriveIdempotencyKey(scope, args, fields),
    hash: paramsHashOf(intentOf(fields, args)),
  };
}

describe('when a request is repeated with only non-intent arguments changed', () => {
  it.each<[string, IntentFields, Record<string, unknown>, Record<string, unknown>]>([
    ['a reworded reason', REFUND, refund, { ...refund, reason: 'cold soup, and it took an hour' }],
    ['a reason added', REFUND, { order_id: 'ord_1001', amount_cents: 1500 }, refund],
    [
      'confirmed: true added after the caller said yes',
      REFUND,
      refund,
      { ...refund, confirmed: true },
    ],
    [
      'reordered keys',
      REFUND,
      refund,
      { reason: refund.reason, amount_cents: 1500, order_id: 'ord_1001' },
    ],
    [
      'white space around and inside the order id',
      REFUND,
      refund,
      { ...refund, order_id: '  ord_1001 ' },
    ],
    [
      'the name spelt again differently',
      BOOKING,
      table,
      { ...table, name: 'Ada  Lovelace (Countess)' },
    ],
    [
      'an intent field left out and sent as null',
      ['order_id', 'note'],
      { order_id: 'ord_1001' },
      { order_id: 'ord_1001', note: null },
    ],
  ])('should give the same key and conflict hash for %s', (_case, fields, first, again) => {
    expect(identity(fields, again)).toEqual(identity(fields, first));
  });
});

describe('when a request differs in an intent field', () => {
  it.each<[string, IntentFields, Record<string, unknown>, Record<string, unknown>]>([
    ['a different amount', REFUND, refund, { ...refund, amount_cents: 1600 }],
    ['a different order', REFUND, refund, { ...refund, order_id: 'ord_1002' }],
    ['an order id in another case', REFUND, refund, { ...refund, order_id: 'ORD_1001' }],
    ['another time', BOOKING, table, { ...table, time: '19:30' }],
    ['another party size', BOOKING, table, { ...table, party_size: 3 }],
  ])('should give another key and conflict hash for %s', (_case, fields, first, again) => {
    const a = identity(fields, first);
    const b = identity(fields, again);
    expect(b.key).not.toBe(a.key);
    expect(b.hash).not.toBe(a.hash);
  });

  it('should keep the conflict check on the intent fields when the key is given (same key, another amount)', () => {
    expect(paramsHashOf(intentOf(REFUND, { ...refund, amount_cents: 1 }))).not.toBe(
      paramsHashOf(intentOf(REFUND, refund)),
    );
  });
});

describe('when an action declares no intent fields', () => {
  it('should key by every argument, as earlier versions did', () => {
    expect(deriveIdempotencyKey(scope, refund, 'all')).toBe(
      deriveIdempotencyKey(scope, { ...refund }),
    );
    expect(deriveIdempotencyKey(scope, { ...refund, reason: 'other' }, 'all')).not.toBe(
      deriveIdempotencyKey(scope, refund, 'all'),
    );
  });

  it('should not share a key between fields-keyed and argument-keyed requests', () => {
    const args = { order_id: 'ord_1001', amount_cents: 1500 };
    expect(deriveIdempotencyKey(scope, args, REFUND)).not.toBe(
      deriveIdempotencyKey(scope, args, 'all'),
    );
  });

  it.each<[string, { intent?: IntentFields }, readonly string[] | undefined, IntentFields]>([
    [
      'the configured fields over the tool',
      { intent: ['order_id'] },
      ['order_id', 'amount_cents'],
      ['order_id'],
    ],
    ['the configured all over the tool', { intent: 'all' }, ['order_id'], 'all'],
    [
      'the tool when nothing is configured',
      {},
      ['order_id', 'amount_cents'],
      ['order_id', 'amount_cents'],
    ],
    ['all arguments when neither says', {}, undefined, 'all'],
  ])('should take %s', (_case, action, tool, expected) => {
    expect(intentFieldsOf(action, { intentFields: tool })).toEqual(expected);
  });
});
