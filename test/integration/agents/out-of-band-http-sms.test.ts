/**
 * The generic HTTP SMS channel: the configured template POSTed with the bearer token from the
 * environment and the channel's idempotency key, the same on a retry, recorded on the operation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';
import { HttpReceiver } from '../../support/http-receiver.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-smsapi';
const TOKEN = 'tok_sms_test_5f2c';
const receiver = new HttpReceiver();
let h: Harness;

beforeAll(async () => {
  process.env.CALLGATE_TEST_SMS_TOKEN = TOKEN;
  await receiver.up();
  h = await startHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    tenantSettings: () => ({
      [TENANT]: {
        notify: {
          sms: {
            type: 'http',
            url: `${receiver.url}/v1/sms`,
            tokenEnv: 'CALLGATE_TEST_SMS_TOKEN',
            body: '{"to":"{to}","message":"{text}","reference":"{operation_id}","tenant":"{tenant_id}"}',
          },
          retry: { attempts: 5, backoffMs: 20, maxBackoffMs: 40 },
        },
      },
    }),
  });
});
afterAll(async () => {
  await h.close();
  await receiver.down();
  delete process.env.CALLGATE_TEST_SMS_TOKEN;
});

describe('when a result goes out of band to a tenant with an HTTP SMS API', () => {
  it('should POST the filled template with the bearer token and one idempotency key, also on the retry', async () => {
    const decision = await h.layer.admit({
      tenantId: TENANT,
      action: 'book_table',
      args: booking(),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const op = await h.layer.waitFor(TENANT, decision.operationId, 10_000);
    if (!op) throw new Error('the booking did not finish');
    // The API stores the first request but its answer is a 500: the retry must carry the same key.
    receiver.answers = [500];
    const text = 'Booked: "Trattoria Roma", 20:00\nReference B-7.';
    const channels = await h.layer.outOfBand.enqueue({
      operationId: op.operationId,
      tenantId: TENANT,
      sessionId: op.scope.sessionId,
      caller: '+15550177',
      state: op.state,
      text,
      reasons: ['caller_hung_up', 'committed'],
    });
    expect(channels).toEqual(['sms']);

    const done = await waitFor(
      async () => {
        const current = await h.layer.ledger.get(TENANT, op.operationId);
        return current?.outOfBand?.sms?.state === 'delivered' ? current : undefined;
      },
      10_000,
      'the SMS to be delivered',
    );
    expect(done.outOfBand?.sms).toMatchObject({ state: 'delivered', attempts: 2 });
    expect(done.outOfBand?.webhook).toBeUndefined();

    expect(receiver.requests.map((r) => r.status)).toEqual([500, 200]);
    for (const request of receiver.requests) {
      expect(request.path).toBe('/v1/sms');
      expect(request.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(request.headers['idempotency-key']).toBe(`oob-${op.operationId}-sms`);
      expect(request.headers['content-type']).toBe('application/json');
      expect(JSON.parse(request.raw)).toEqual({
        to: '+15550177',
        message: text,
        reference: op.operationId,
        tenant: TENANT,
      });
    }
    expect(receiver.accepted(`oob-${op.operationId}-sms`)).toHaveLength(1);
  });
});
