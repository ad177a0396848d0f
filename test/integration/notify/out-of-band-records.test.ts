/**
 * The per-channel out-of-band records move forward only (record-channel-2.lua), on a real
 * operation in Redis: what each write does from each state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutOfBandRecords } from '../../../jobs/notify/out-of-band-records.ts';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';

const TENANT = 'tenant-records';
let h: Harness;
let records: OutOfBandRecords;

beforeAll(async () => {
  h = await startHarness({ tenants: { [TENANT]: { book_table: BOOK } }, workers: false });
  records = h.layer.outOfBand.records;
});
afterAll(async () => h.close());

async function operation(): Promise<{
  operationId: string;
  tenantId: string;
  sessionId: string;
  state: string;
  text: string;
  reasons: string[];
}> {
  const decision = await h.layer.admit({
    tenantId: TENANT,
    action: 'book_table',
    args: booking(),
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(decision.type);
  return {
    operationId: decision.operationId,
    tenantId: TENANT,
    sessionId: 's',
    state: 'COMMITTED',
    text: 'Booked.',
    reasons: [],
  };
}

describe('when a channel record is written', () => {
  it('should keep a queued or sent message as it is when it is queued again', async () => {
    const message = await operation();
    expect((await records.queue(message, 'sms')).status).toBe('ok');
    await records.sent(message, 'sms', {
      state: 'failed',
      attempts: 2,
      error: 'SMS API answered 503',
    });
    expect(await records.queue(message, 'sms')).toMatchObject({
      status: 'as_is',
      record: { state: 'failed', attempts: 2, error: 'SMS API answered 503' },
    });
    expect(await records.message(TENANT, message.operationId)).toEqual(message);
  });

  it('should never move a delivered message back, nor re-drive it', async () => {
    const message = await operation();
    await records.queue(message, 'webhook');
    expect(
      (await records.sent(message, 'webhook', { state: 'delivered', attempts: 1 })).record,
    ).toMatchObject({ state: 'delivered', attempts: 1 });
    for (const state of ['failed', 'gave_up', 'delivered'] as const)
      expect((await records.sent(message, 'webhook', { state, attempts: 9 })).status).toBe('as_is');
    expect((await records.redrive(TENANT, message.operationId, 'webhook', 0, true)).status).toBe(
      'as_is',
    );
    expect(
      (await h.layer.ledger.get(TENANT, message.operationId))?.outOfBand?.webhook,
    ).toMatchObject({ state: 'delivered', attempts: 1 });
  });

  it('should index a message that gave up until it is re-driven, within the bound, keeping when it was first queued', async () => {
    const message = await operation();
    const queued = (await records.queue(message, 'sms')).record;
    await records.sent(message, 'sms', { state: 'gave_up', attempts: 16, error: 'timeout' });
    expect(await records.givenUp(TENANT, 0, Number.MAX_SAFE_INTEGER, 100)).toContainEqual({
      operationId: message.operationId,
      channel: 'sms',
      since: queued?.since,
    });
    // A message still being sent is not re-driven unless its job is gone.
    expect((await records.redrive(TENANT, message.operationId, 'webhook', 0, false)).status).toBe(
      'as_is',
    );
    expect(await records.redrive(TENANT, message.operationId, 'sms', 1, false)).toMatchObject({
      status: 'ok',
      record: { state: 'queued', attempts: 0, redrives: 1, since: queued?.since },
    });
    expect((await records.redrive(TENANT, message.operationId, 'sms', 1, false)).status).toBe(
      'as_is',
    );
    expect(await records.givenUp(TENANT, 0, Number.MAX_SAFE_INTEGER, 100)).not.toContainEqual(
      expect.objectContaining({ operationId: message.operationId }),
    );
    await records.sent(message, 'sms', { state: 'gave_up', attempts: 16 });
    expect((await records.redrive(TENANT, message.operationId, 'sms', 1, false)).status).toBe(
      'bound',
    );
    expect((await records.redrive(TENANT, message.operationId, 'sms', 0, false)).status).toBe('ok');
  });

  it('should write nothing for an operation that does not exist', async () => {
    expect(
      (
        await records.queue(
          {
            operationId: 'op_MISSING',
            tenantId: TENANT,
            sessionId: 's',
            state: 'COMMITTED',
            text: '',
            reasons: [],
          },
          'sms',
        )
      ).status,
    ).toBe('not_found');
    expect(await h.layer.ledger.get(TENANT, 'op_MISSING')).toBeUndefined();
  });
});
