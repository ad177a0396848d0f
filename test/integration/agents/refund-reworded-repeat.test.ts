import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUND } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';

let a: AgentsHarness;
/** The refund's intent fields come from the tenant's configuration. */
const CONFIGURED = 'tenant-intent-config';
/** No `intent` in the configuration: the refund tool's declared fields apply. */
const DECLARED = 'tenant-intent-tool';

beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: {
      [CONFIGURED]: {
        refund: { ...REFUND, confirmAbove: 100, intent: ['order_id', 'amount_cents'] },
      },
      [DECLARED]: { refund: { ...REFUND, confirmAbove: 100 } },
    },
  });
});
afterAll(async () => a.close());

describe.each([
  ['configured on the action', CONFIGURED, 'ord_1003'],
  ['declared by the tool', DECLARED, 'ord_1004'],
])(
  'when a committed refund is asked for again with a reworded reason and confirmed added (intent %s)',
  (_how, tenant, order) => {
    it('should answer duplicate with the first operation, and the sandbox should have refunded once', async () => {
      const { session } = a.call(tenant, 'billing');
      const first = await a.runtime.handle(session, {
        callId: 'call_1',
        name: 'refund',
        arguments: { order_id: order, amount_cents: 2500, reason: 'the soup was cold' },
      });
      expect(first).toMatchObject({ status: 'started' });
      const operationId = String(first.operation_id);
      expect((await a.h.layer.waitFor(tenant, operationId, 10_000))?.state).toBe('COMMITTED');

      // The model repeats it after the caller said yes, in its own words, with another call id.
      const again = await a.runtime.handle(session, {
        callId: 'call_2',
        name: 'refund',
        arguments: {
          confirmed: true,
          reason: 'Customer says the soup arrived cold; they confirmed.',
          amount_cents: 2500,
          order_id: order,
        },
      });
      expect(again).toMatchObject({
        status: 'duplicate',
        operation_id: operationId,
        state: 'COMMITTED',
      });

      const ops = await a.h.layer.ledger.listBySession(tenant, session.sessionId);
      expect(ops.map((op) => op.operationId)).toEqual([operationId]);
      // What the provider was sent is the first request's, non-intent arguments included.
      expect(ops[0]?.params).toEqual({
        order_id: order,
        amount_cents: 2500,
        reason: 'the soup was cold',
      });
      expect(await a.h.sandbox.effects({ tenant, operation: 'refund' })).toHaveLength(1);
    });
  },
);

describe('when the same refund is asked for with another amount', () => {
  it('should start a second operation (another intent)', async () => {
    const { session } = a.call(CONFIGURED, 'billing');
    const first = await a.runtime.handle(session, {
      callId: 'call_1',
      name: 'refund',
      arguments: { order_id: 'ord_1005', amount_cents: 1000, reason: 'late' },
    });
    const other = await a.runtime.handle(session, {
      callId: 'call_2',
      name: 'refund',
      arguments: { order_id: 'ord_1005', amount_cents: 1200, reason: 'late' },
    });
    expect(first).toMatchObject({ status: 'started' });
    expect(other).toMatchObject({ status: 'started' });
    expect(other.operation_id).not.toBe(first.operation_id);
  });
});
