import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../../jobs/notify/webhook-sender.ts';
import { BOOK, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { sandboxMessages } from '../../support/sandbox-messages.ts';

const SECRET = 'whsec_test_0123456789';
let h: Harness;

beforeAll(async () => {
  process.env.CALLGATE_TEST_WEBHOOK_SECRET = SECRET;
  h = await startHarness({
    tenants: { 'tenant-hook': { book_table: BOOK }, 'tenant-sms': { book_table: BOOK } },
    tenantSettings: (url) => ({
      'tenant-hook': {
        notify: {
          webhookUrl: `${url}/webhooks`,
          webhookSecretEnv: 'CALLGATE_TEST_WEBHOOK_SECRET',
          sms: 'none',
        },
      },
      'tenant-sms': { notify: { sms: 'sandbox' } },
    }),
  });
});
afterAll(async () => {
  await h.close();
  delete process.env.CALLGATE_TEST_WEBHOOK_SECRET;
});

const sink = (operationId: string) => sandboxMessages(h.sandbox.url, operationId);

const message = (tenantId: string, operationId: string) => ({
  operationId,
  tenantId,
  sessionId: 'sess-oob',
  caller: '+15550199',
  state: 'COMMITTED',
  text: 'Your table booking is confirmed.',
  reasons: ['caller_hung_up', 'committed'],
});

describe('when a result goes out of band to a tenant with a webhook', () => {
  it('should POST it signed with HMAC-SHA256 over the timestamp and body, verifiable with the shared secret', async () => {
    await h.layer.outOfBand.enqueue(message('tenant-hook', 'op_HOOK1'));
    const [received] = await waitFor(
      async () => ((await sink('op_HOOK1')).length > 0 ? sink('op_HOOK1') : undefined),
      10_000,
      'the webhook',
    );
    expect(received?.channel).toBe('webhook');
    expect(received?.body).toMatchObject({
      type: 'operation.result',
      operation_id: 'op_HOOK1',
      tenant_id: 'tenant-hook',
      state: 'COMMITTED',
      text: 'Your table booking is confirmed.',
    });
    const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(received?.signature ?? '');
    expect(match).not.toBeNull();
    const expected = createHmac('sha256', SECRET)
      .update(`${match?.[1] ?? ''}.${received?.raw ?? ''}`)
      .digest('hex');
    expect(match?.[2]).toBe(expected);
    // A forged body does not verify.
    expect(
      createHmac('sha256', SECRET)
        .update(`${match?.[1] ?? ''}.{"forged":true}`)
        .digest('hex'),
    ).not.toBe(match?.[2]);
    // No SMS for this tenant.
    expect((await sink('op_HOOK1')).map((m) => m.channel)).toEqual(['webhook']);
  });

  it('should sign deterministically for a given secret, time and body', () => {
    expect(signWebhook('k', '{"a":1}', 1_000)).toBe(
      `t=1000,v1=${createHmac('sha256', 'k').update('1000.{"a":1}').digest('hex')}`,
    );
  });
});

describe('when the same result is queued twice', () => {
  it('should send one SMS for the operation', async () => {
    await h.layer.outOfBand.enqueue(message('tenant-sms', 'op_SMS1'));
    await h.layer.outOfBand.enqueue(message('tenant-sms', 'op_SMS1'));
    await waitFor(
      async () => ((await sink('op_SMS1')).length > 0 ? true : undefined),
      10_000,
      'the SMS',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const sent = await sink('op_SMS1');
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      channel: 'sms',
      deliveries: 1,
      body: { to: '+15550199', text: 'Your table booking is confirmed.' },
    });
  });
});
