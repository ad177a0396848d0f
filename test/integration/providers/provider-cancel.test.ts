import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpProvider } from '../../../jobs/providers/http-provider.ts';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';
import {
  freshBooking,
  providerRequest,
  sleep,
  startSandboxFixture,
  type SandboxFixture,
} from './sandbox-fixture.ts';

/** Long enough that a cancel sent right after the request arrives wins the race. */
const HELD_MS = 300;
/** Long enough that an answer arriving well before it can only be the cancel's doing. */
const LONG_HELD_MS = 1500;

describe('when an operation in progress is cancelled', () => {
  let sandbox: SandboxFixture;
  let bookings: SandboxProvider;
  let tenantSeq = 0;
  const tenant = () => `cancel-${++tenantSeq}`;

  beforeAll(async () => {
    sandbox = await startSandboxFixture();
    bookings = new SandboxProvider({
      name: 'bookings',
      sandboxUrl: sandbox.url,
      service: 'bookings',
      timeoutMs: 2000,
    });
  });
  afterAll(async () => {
    await bookings.close();
    await sandbox.close();
  });

  /** Starts a booking held by latency and resolves once the sandbox has received it. */
  async function heldBooking(fault: string) {
    const tenantId = tenant();
    await sandbox.addRule({ tenant: tenantId, operation: 'book', fault });
    const request = providerRequest('book', freshBooking(), { tenantId });
    const execution = bookings.execute(request);
    await expect.poll(() => sandbox.counts().then((c) => c.requests[request.operationId])).toBe(1);
    return { request, execution };
  }

  describe('with cancel support on, before the commit', () => {
    it('should confirm the cancel, answer the held request at once with a final failure and never commit the effect', async () => {
      const { request, execution } = await heldBooking(`latency=${LONG_HELD_MS}`);
      const cancelledAt = Date.now();
      expect(await bookings.cancel(request)).toEqual({ status: 'cancelled' });
      expect(await execution).toMatchObject({
        status: 'failed',
        retryable: false,
        code: 'cancelled',
      });
      expect(Date.now() - cancelledAt).toBeLessThan(LONG_HELD_MS / 2);
      await sleep(LONG_HELD_MS);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
      expect(await bookings.lookup(request)).toEqual({ status: 'cancelled' });
    });
  });

  describe('with cancel support off', () => {
    it('should answer not_supported and the effect should still commit', async () => {
      const { request, execution } = await heldBooking(`latency=${HELD_MS},cancel=off`);
      expect(await bookings.cancel(request)).toEqual({ status: 'not_supported' });
      expect(await execution).toMatchObject({ status: 'ok' });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
    });

    it('should answer not_supported without a request when the provider declares no cancel', async () => {
      const noCancel = new HttpProvider({
        name: 'plain',
        baseUrl: `${sandbox.url}/bookings`,
        honoursIdempotencyKeys: true,
        supportsCancel: false,
        timeoutMs: 1000,
      });
      const request = providerRequest('book', freshBooking());
      expect(await noCancel.cancel(request)).toEqual({ status: 'not_supported' });
      expect((await sandbox.counts()).requests[request.operationId]).toBeUndefined();
      await noCancel.close();
    });
  });

  describe('with a deferred cancel', () => {
    it('should answer pending, and lookup should later report cancelled with no effect', async () => {
      const { request, execution } = await heldBooking(`latency=${HELD_MS},cancel=deferred`);
      expect(await bookings.cancel(request)).toEqual({ status: 'pending' });
      expect(await bookings.lookup(request)).toMatchObject({ status: 'unknown' });
      expect(await execution).toMatchObject({ status: 'failed', code: 'cancelled' });
      expect(await bookings.lookup(request)).toEqual({ status: 'cancelled' });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
    });
  });

  describe('after the commit', () => {
    it('should answer already_committed with the result', async () => {
      const request = providerRequest('book', freshBooking());
      const booked = await bookings.execute(request);
      expect(booked.status).toBe('ok');
      const result = booked.status === 'ok' ? booked.result : {};
      expect(await bookings.cancel(request)).toEqual({ status: 'already_committed', result });
    });
  });

  describe('before the request reached the sandbox', () => {
    it('should answer cancelled and refuse the late request without an effect', async () => {
      const request = providerRequest('book', freshBooking());
      expect(await bookings.cancel(request)).toEqual({ status: 'cancelled' });
      expect(await bookings.execute(request)).toMatchObject({
        status: 'failed',
        retryable: false,
        code: 'cancelled',
      });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(0);
    });
  });
});
