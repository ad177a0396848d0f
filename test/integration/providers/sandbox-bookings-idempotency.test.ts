import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';
import {
  freshBooking,
  providerRequest,
  startSandboxFixture,
  type SandboxFixture,
} from './sandbox-fixture.ts';

describe('the sandbox bookings service through the sandbox provider', () => {
  let sandbox: SandboxFixture;
  let bookings: SandboxProvider;

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

  it('should declare that bookings honour idempotency keys and support cancel and lookup', () => {
    expect(bookings.honoursIdempotencyKeys).toBe(true);
    expect(bookings.supportsCancel).toBe(true);
    expect(bookings.supportsLookup).toBe(true);
  });

  describe('when the same booking is sent twice with the same key', () => {
    it('should commit one effect and answer both with the same booking', async () => {
      const request = providerRequest('book', freshBooking());
      const first = await bookings.execute(request);
      const second = await bookings.execute(request);
      expect(first.status).toBe('ok');
      expect(second).toEqual(first);
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
      expect((await sandbox.counts()).requests[request.operationId]).toBe(2);
    });
  });

  describe('when 10 identical requests with one key arrive at once', () => {
    it('should commit exactly one effect', async () => {
      const request = providerRequest('book', freshBooking());
      const results = await Promise.all(
        Array.from({ length: 10 }, () => bookings.execute(request)),
      );
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
      // Each answer is the replayed booking or "in progress, retry": never a definite failure.
      for (const result of results) {
        if (result.status === 'failed')
          expect(result).toMatchObject({ retryable: true, code: 'request_in_progress' });
      }
      expect(results.some((r) => r.status === 'ok')).toBe(true);
    });
  });

  describe('when a key is reused with different parameters', () => {
    it('should refuse it as a final conflict and commit nothing new', async () => {
      const params = freshBooking();
      const request = providerRequest('book', params);
      await bookings.execute(request);
      const reused = await bookings.execute({ ...request, params: { ...params, party_size: 2 } });
      expect(reused).toMatchObject({
        status: 'failed',
        retryable: false,
        code: 'idempotency_key_reused',
      });
      expect(await sandbox.effects({ reference: request.operationId })).toHaveLength(1);
    });
  });

  describe('when two keys book the same table slot', () => {
    it('should commit one booking and fail the other definitely', async () => {
      const params = freshBooking();
      const [a, b] = await Promise.all([
        bookings.execute(providerRequest('book', params)),
        bookings.execute(providerRequest('book', params)),
      ]);
      const outcomes = [a, b].map((r) => r.status).sort();
      expect(outcomes).toEqual(['failed', 'ok']);
      const failed = [a, b].find((r) => r.status === 'failed');
      expect(failed).toMatchObject({ retryable: false, code: 'slot_taken' });
      expect(
        await sandbox
          .effects({ operation: 'book' })
          .then((e) => e.filter((x) => x.result.date === params.date)),
      ).toHaveLength(1);
    });
  });

  describe('when a booking is cancelled as compensation', () => {
    it('should free the slot, and a repeated cancellation should add no effect', async () => {
      const params = freshBooking();
      const booked = await bookings.execute(providerRequest('book', params));
      expect(booked.status).toBe('ok');
      const bookingId = booked.status === 'ok' ? booked.result.booking_id : undefined;
      const undo = await bookings.execute(
        providerRequest('cancel_booking', { booking_id: bookingId }),
      );
      expect(undo).toMatchObject({ status: 'ok', result: { status: 'cancelled' } });
      const again = await bookings.execute(
        providerRequest('cancel_booking', { booking_id: bookingId }),
      );
      expect(again).toMatchObject({ status: 'ok', result: { already_cancelled: true } });
      expect(
        await sandbox
          .effects({ operation: 'cancel_booking' })
          .then((e) => e.filter((x) => x.result.booking_id === bookingId)),
      ).toHaveLength(1);
      const rebooked = await bookings.execute(providerRequest('book', params));
      expect(rebooked.status).toBe('ok');
    });
  });

  describe('when availability is read', () => {
    it('should leave out a booked table and commit no effect', async () => {
      const params = freshBooking();
      await bookings.execute(providerRequest('book', params));
      const before = (await sandbox.effects()).length;
      const read = await bookings.execute(
        providerRequest('availability', {
          restaurant: params.restaurant,
          date: params.date,
          time: '19:00',
        }),
      );
      expect(read).toMatchObject({
        status: 'ok',
        result: { slots: [{ time: '19:00', tables: [1, 2, 4, 5] }] },
      });
      expect((await sandbox.effects()).length).toBe(before);
    });
  });

  describe('when a booking is looked up', () => {
    it('should find it by operation id, and by idempotency key when the id is unknown', async () => {
      const request = providerRequest('book', freshBooking());
      const booked = await bookings.execute(request);
      const expected = booked.status === 'ok' ? booked.result : {};
      expect(await bookings.lookup(request)).toMatchObject({
        status: 'committed',
        result: expected,
      });
      expect(await bookings.lookup({ ...request, operationId: 'op_never_sent' })).toMatchObject({
        status: 'committed',
        result: expected,
      });
      expect(await bookings.lookup(providerRequest('book', {}))).toEqual({ status: 'not_found' });
    });

    it('should report a definite business failure as failed', async () => {
      const params = freshBooking();
      await bookings.execute(providerRequest('book', params));
      const loser = providerRequest('book', params);
      await bookings.execute(loser);
      expect(await bookings.lookup(loser)).toMatchObject({ status: 'failed', code: 'slot_taken' });
    });
  });
});
