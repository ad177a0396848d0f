import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';
import { providerRequest, startSandboxFixture, type SandboxFixture } from './sandbox-fixture.ts';

describe('the sandbox payments service through the sandbox provider', () => {
  let sandbox: SandboxFixture;
  let payments: SandboxProvider;

  beforeAll(async () => {
    sandbox = await startSandboxFixture();
    payments = new SandboxProvider({
      name: 'payments',
      sandboxUrl: sandbox.url,
      service: 'payments',
      timeoutMs: 2000,
    });
  });
  afterAll(async () => {
    await payments.close();
    await sandbox.close();
  });

  it('should declare that payments do not honour idempotency keys', () => {
    expect(payments.honoursIdempotencyKeys).toBe(false);
  });

  describe('when the same refund request is sent twice', () => {
    it('should refund twice: two effects under one reference (the hazard UNKNOWN guards against)', async () => {
      const request = providerRequest('refund', { order_id: 'ord_1002', amount_cents: 250 });
      const first = await payments.execute(request);
      const second = await payments.execute(request);
      expect(first.status).toBe('ok');
      expect(second.status).toBe('ok');
      expect(
        first.status === 'ok' && second.status === 'ok' && first.providerRef !== second.providerRef,
      ).toBe(true);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(2);
      expect((await sandbox.counts()).effects[request.operationId]).toBe(2);
      const order = await payments.execute(
        providerRequest('lookup_order', { order_id: 'ord_1002' }),
      );
      expect(order).toMatchObject({
        status: 'ok',
        result: { refunded_cents: 500, status: 'partially_refunded' },
      });
    });
  });

  describe('when a refund is looked up by our operation reference', () => {
    it('should return the committed refund', async () => {
      const request = providerRequest('refund', {
        order_id: 'ord_1003',
        amount_cents: 100,
        reason: 'cold soup',
      });
      const refunded = await payments.execute(request);
      expect(refunded.status).toBe('ok');
      if (refunded.status !== 'ok') return;
      expect(await payments.lookup(request)).toEqual({
        status: 'committed',
        result: refunded.result,
        providerRef: refunded.providerRef,
      });
    });
  });

  describe('when orders are looked up', () => {
    it('should find the seeded orders, the same on every start', async () => {
      const order = await payments.execute(
        providerRequest('lookup_order', { order_id: 'ord_1001' }),
      );
      expect(order).toMatchObject({
        status: 'ok',
        result: { order_id: 'ord_1001', total_cents: 5000, currency: 'EUR' },
      });
      expect(
        await payments.execute(providerRequest('lookup_order', { order_id: 'ord_1050' })),
      ).toMatchObject({ status: 'ok' });
      expect(
        await payments.execute(providerRequest('lookup_order', { order_id: 'ord_9999' })),
      ).toMatchObject({
        status: 'failed',
        retryable: false,
        code: 'order_not_found',
      });
    });
  });

  describe('when a refund exceeds what is left on the order', () => {
    it('should fail definitely and commit nothing', async () => {
      const request = providerRequest('refund', { order_id: 'ord_1004', amount_cents: 10_000_000 });
      expect(await payments.execute(request)).toMatchObject({
        status: 'failed',
        retryable: false,
        code: 'refund_exceeds_balance',
      });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
      expect(await payments.lookup(request)).toMatchObject({
        status: 'failed',
        code: 'refund_exceeds_balance',
      });
    });
  });

  describe('when the sandbox is reset', () => {
    it('should forget effects and restore the seeded balances', async () => {
      await payments.execute(
        providerRequest('refund', { order_id: 'ord_1005', amount_cents: 100 }),
      );
      await sandbox.reset();
      expect(await sandbox.effects()).toHaveLength(0);
      const order = await payments.execute(
        providerRequest('lookup_order', { order_id: 'ord_1005' }),
      );
      expect(order).toMatchObject({ status: 'ok', result: { refunded_cents: 0 } });
    });
  });
});
