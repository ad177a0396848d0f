/**
 * A tenant sends results out of band by webhook and by SMS, and its webhook receiver is down when a
 * caller hangs up before the commit: the SMS goes out at once, the webhook once the receiver is
 * back, each recorded on the operation per channel and each taken exactly once by its receiver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking } from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { HttpReceiver } from '../../support/http-receiver.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-both';
const receiver = new HttpReceiver();
let a: AgentsHarness;

beforeAll(async () => {
  process.env.CALLGATE_TEST_OOB_SECRET = 'whsec_down_test';
  await receiver.up();
  await receiver.down();
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    tenantSettings: () => ({
      [TENANT]: {
        notify: {
          webhookUrl: `${receiver.url}/hook`,
          webhookSecretEnv: 'CALLGATE_TEST_OOB_SECRET',
          sms: 'sandbox',
          retry: { attempts: 100, backoffMs: 50, maxBackoffMs: 200 },
        },
      },
    }),
  });
});
afterAll(async () => {
  await a.close();
  await receiver.down();
  delete process.env.CALLGATE_TEST_OOB_SECRET;
});

describe('when the webhook receiver is down while SMS works', () => {
  it('should deliver the SMS at once and the webhook after the receiver is back, each once, recorded per channel', async () => {
    const { session } = a.call(TENANT);
    await a.h.sandbox.addRule({ fault: 'latency=300', tenant: TENANT, operation: 'book', nth: 1 });
    const output = await a.runtime.handle(session, {
      callId: 'call_oob_down',
      name: 'book_table',
      arguments: { ...booking(), name: 'Ada' },
    });
    if (output.status !== 'started')
      throw new Error(`book_table answered ${JSON.stringify(output)}`);
    const id = String(output.operation_id);
    await a.delivery.onCallEnded(session.sessionId, 'hung_up');

    // The gateway's record says the message is queued, not delivered.
    const queued = await waitFor(
      async () => {
        const op = await a.h.layer.ledger.get(TENANT, id);
        return op?.delivery?.channel === 'out_of_band' ? op : undefined;
      },
      10_000,
      'the message to be queued out of band',
    );
    expect(queued.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      channel: 'out_of_band',
      delivered: false,
      queued: true,
    });

    const smsDone = await waitFor(
      async () => {
        const op = await a.h.layer.ledger.get(TENANT, id);
        return op?.outOfBand?.sms?.state === 'delivered' ? op : undefined;
      },
      10_000,
      'the SMS to be delivered',
    );
    expect(smsDone.outOfBand?.webhook?.state).not.toBe('delivered');
    expect(receiver.requests).toHaveLength(0);
    const sms = await messages(a.h, id);
    expect(sms.map((m) => [m.channel, m.idempotencyKey, m.deliveries])).toEqual([
      ['sms', `oob-${id}-sms`, 1],
    ]);

    // The webhook keeps failing on its own, retried, until the receiver is back.
    await waitFor(
      async () => {
        const op = await a.h.layer.ledger.get(TENANT, id);
        return op?.outOfBand?.webhook?.state === 'failed' && op.outOfBand.webhook.attempts >= 2
          ? true
          : undefined;
      },
      10_000,
      'the webhook to fail twice',
    );
    await receiver.up();
    const done = await waitFor(
      async () => {
        const op = await a.h.layer.ledger.get(TENANT, id);
        return op?.outOfBand?.webhook?.state === 'delivered' ? op : undefined;
      },
      10_000,
      'the webhook to be delivered',
    );

    expect(done.outOfBand?.webhook).toMatchObject({ state: 'delivered', redrives: 0 });
    expect(done.outOfBand?.webhook?.attempts).toBeGreaterThanOrEqual(3);
    expect(done.outOfBand?.sms).toMatchObject({ state: 'delivered', attempts: 1 });
    // Still queued in the gateway's record: the per-channel records say what was delivered.
    expect(done.delivery).toMatchObject({ delivered: false, queued: true });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.requests.map((r) => [r.path, r.headers['idempotency-key']])).toEqual([
      ['/hook', `oob-${id}-webhook`],
    ]);
    expect(JSON.parse(receiver.requests[0]?.raw ?? '{}')).toMatchObject({
      type: 'operation.result',
      operation_id: id,
      state: 'COMMITTED',
    });
    expect((await messages(a.h, id)).map((m) => m.deliveries)).toEqual([1]);
  });
});
