import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ProviderOutcomeUnknownError,
  ProviderUnreachableError,
} from '../../../jobs/providers/provider.ts';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';
import {
  freshBooking,
  providerRequest,
  startSandboxFixture,
  type SandboxFixture,
} from './sandbox-fixture.ts';

/** Short, so a commit-then-timeout test takes a fraction of a second; the sandbox holds for 60 s. */
const CLIENT_TIMEOUT_MS = 300;

describe('when the sandbox injects faults, the sandbox provider', () => {
  let sandbox: SandboxFixture;
  let payments: SandboxProvider;
  let bookings: SandboxProvider;
  let tenantSeq = 0;
  /** Each test gets its own tenant, so a fault rule hits only that test's requests. */
  const tenant = () => `faults-${++tenantSeq}`;

  beforeAll(async () => {
    sandbox = await startSandboxFixture();
    payments = new SandboxProvider({
      name: 'payments',
      sandboxUrl: sandbox.url,
      service: 'payments',
      timeoutMs: CLIENT_TIMEOUT_MS,
    });
    bookings = new SandboxProvider({
      name: 'bookings',
      sandboxUrl: sandbox.url,
      service: 'bookings',
      timeoutMs: CLIENT_TIMEOUT_MS,
    });
  });
  afterAll(async () => {
    await payments.close();
    await bookings.close();
    await sandbox.close();
  });

  const refund = (tenantId: string) =>
    providerRequest('refund', { order_id: 'ord_1001', amount_cents: 100 }, { tenantId });

  describe('when a refund commits and the answer is held past the client timeout', () => {
    it('should throw outcome unknown while the effect IS recorded, and lookup should return the real result', async () => {
      const tenantId = tenant();
      await sandbox.addRule({
        tenant: tenantId,
        operation: 'refund',
        fault: 'commit-then-timeout',
      });
      const request = refund(tenantId);
      await expect(payments.execute(request)).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
      const effects = await sandbox.effects({ reference: request.operationId });
      expect(effects).toHaveLength(1);
      const lookup = await payments.lookup(request);
      expect(lookup).toEqual({
        status: 'committed',
        result: effects[0]?.result,
        providerRef: effects[0]?.providerRef,
      });
      expect(lookup).toMatchObject({
        result: { order_id: 'ord_1001', amount_cents: 100, status: 'succeeded' },
      });
    });
  });

  describe('when the sandbox answers 503 before committing', () => {
    it('should return a retryable failure (its own 503 says the request was turned away) and record no effect', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', fault: 'error=503' });
      const request = refund(tenantId);
      expect(await payments.execute(request)).toMatchObject({
        status: 'failed',
        retryable: true,
        code: 'injected_fault',
      });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
      expect(await payments.lookup(request)).toEqual({ status: 'not_found' });
    });
  });

  describe('when the sandbox answers 500 before committing', () => {
    it('should throw outcome unknown (a 500 may follow a commit; the client cannot tell), and lookup should say not_found', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', fault: 'error=500' });
      const request = refund(tenantId);
      await expect(payments.execute(request)).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
      expect(await payments.lookup(request)).toEqual({ status: 'not_found' });
    });
  });

  describe('when the connection is dropped after the commit', () => {
    it('should throw outcome unknown and the effect should be recorded', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', fault: 'drop-after-commit' });
      const request = refund(tenantId);
      await expect(payments.execute(request)).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
    });
  });

  describe('when the connection is dropped before the commit', () => {
    it('should throw outcome unknown (the client cannot tell), and lookup should say not_found', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', fault: 'drop-before-commit' });
      const request = refund(tenantId);
      await expect(payments.execute(request)).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
      expect(await payments.lookup(request)).toEqual({ status: 'not_found' });
    });
  });

  describe('when a 2xx answer after the commit is garbage', () => {
    it('should throw outcome unknown and the effect should be recorded', async () => {
      const tenantId = tenant();
      await sandbox.addRule({
        tenant: tenantId,
        operation: 'refund',
        fault: 'garbage-after-commit',
      });
      const request = refund(tenantId);
      const error: unknown = await payments.execute(request).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderOutcomeUnknownError);
      expect((error as Error).cause).toMatchObject({ code: 'CALLGATE_ERR_PROVIDER_BAD_RESPONSE' });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
    });
  });

  describe('when nothing listens on the provider port', () => {
    it('should throw unreachable', async () => {
      const port = await freePort();
      const nowhere = new SandboxProvider({
        name: 'nowhere',
        sandboxUrl: `http://127.0.0.1:${port}`,
        service: 'payments',
        timeoutMs: 1000,
      });
      const error: unknown = await nowhere.execute(refund(tenant())).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderUnreachableError);
      expect((error as Error).cause).toMatchObject({ code: 'CALLGATE_ERR_PROVIDER_CONNECTION' });
      expect(await nowhere.lookup(refund(tenant()))).toMatchObject({ status: 'unknown' });
      await nowhere.close();
    });
  });

  describe('when the request is aborted', () => {
    it('should throw unreachable if aborted before sending', async () => {
      const request = { ...refund(tenant()), signal: AbortSignal.abort() };
      await expect(payments.execute(request)).rejects.toBeInstanceOf(ProviderUnreachableError);
      expect((await sandbox.counts()).requests[request.operationId]).toBeUndefined();
    });

    it('should throw outcome unknown if aborted after sending, and the sandbox should still commit', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', fault: 'latency=150' });
      const controller = new AbortController();
      const request = { ...refund(tenantId), signal: controller.signal };
      const pending = payments.execute(request);
      setTimeout(() => controller.abort(), 50);
      await expect(pending).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
      await expect
        .poll(() => sandbox.effects({ reference: request.operationId }).then((e) => e.length), {
          timeout: 2000,
        })
        .toBe(1);
    });
  });

  describe('when a rule targets only the second request', () => {
    it('should fail that one and leave the first and third alone', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'refund', nth: 2, fault: 'error=503' });
      const results = [];
      for (let i = 0; i < 3; i++) results.push(await payments.execute(refund(tenantId)));
      expect(results.map((r) => r.status)).toEqual(['ok', 'failed', 'ok']);
      expect(await sandbox.effects({ tenant: tenantId })).toHaveLength(2);
    });
  });

  describe('when a lookup finds the request still processing', () => {
    it('should answer unknown while in flight, then committed', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'book', fault: 'latency=400' });
      const request = providerRequest('book', freshBooking(), { tenantId });
      const pending = bookings.execute(request).catch((e: unknown) => e);
      await expect
        .poll(() => sandbox.counts().then((c) => c.requests[request.operationId]))
        .toBe(1);
      expect(await bookings.lookup(request)).toMatchObject({ status: 'unknown' });
      expect(await pending).toBeInstanceOf(ProviderOutcomeUnknownError);
      await expect
        .poll(() => bookings.lookup(request).then((r) => r.status), { timeout: 2000 })
        .toBe('committed');
    });

    it('should answer unknown when the lookup fault says processing', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'lookup', fault: 'lookup=processing' });
      const request = refund(tenantId);
      expect(await payments.execute(request)).toMatchObject({ status: 'ok' });
      expect(await payments.lookup(request)).toEqual({
        status: 'unknown',
        reason: 'the provider is still processing the request',
        processing: true,
      });
    });

    it('should answer unknown when the lookup itself fails with 503', async () => {
      const tenantId = tenant();
      await sandbox.addRule({ tenant: tenantId, operation: 'lookup', fault: 'error=503' });
      expect(await payments.lookup(refund(tenantId))).toMatchObject({ status: 'unknown' });
    });
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
