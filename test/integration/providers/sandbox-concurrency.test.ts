import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';
import { providerRequest, startSandboxFixture, type SandboxFixture } from './sandbox-fixture.ts';

describe('the sandbox concurrency report', () => {
  let sandbox: SandboxFixture;
  let payments: SandboxProvider;

  beforeAll(async () => {
    sandbox = await startSandboxFixture();
    payments = new SandboxProvider({
      name: 'payments',
      sandboxUrl: sandbox.url,
      service: 'payments',
      timeoutMs: 3000,
    });
  });
  afterAll(async () => {
    await payments.close();
    await sandbox.close();
  });

  const refund = (tenantId: string) =>
    providerRequest('refund', { order_id: 'ord_1010', amount_cents: 10 }, { tenantId });

  describe('when 5 requests of one tenant overlap under latency', () => {
    it('should report a high-water mark of 5 for the tenant and for the operation, and 0 in flight after', async () => {
      await sandbox.addRule({ tenant: 'parallel', fault: 'latency=200' });
      const results = await Promise.all(
        Array.from({ length: 5 }, () => payments.execute(refund('parallel'))),
      );
      expect(results.every((r) => r.status === 'ok')).toBe(true);
      const report = await sandbox.concurrency();
      expect(report.tenants.parallel).toMatchObject({
        current: 0,
        max: 5,
        operations: { refund: { current: 0, max: 5 } },
      });
    });

    it('should count one request begun at each level from 1 to 5', async () => {
      const report = await sandbox.concurrency();
      expect(report.tenants.parallel?.operations.refund?.entered).toEqual({
        '1': 1,
        '2': 1,
        '3': 1,
        '4': 1,
        '5': 1,
      });
    });
  });

  describe('when requests of one tenant run one after another', () => {
    it('should report a high-water mark of 1, apart from other tenants', async () => {
      for (let i = 0; i < 3; i++) await payments.execute(refund('serial'));
      const report = await sandbox.concurrency();
      expect(report.tenants.serial?.max).toBe(1);
      expect(report.tenants.parallel?.max).toBe(5);
    });
  });
});
