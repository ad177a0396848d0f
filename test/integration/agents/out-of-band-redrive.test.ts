/**
 * An out-of-band message whose retries ran out is visible (gave_up on the operation, counted, and
 * in the given-up gauge at scrape) and can be sent again: by an operator through the admin API, or
 * by the automatic pass within its bound. The receiver records it once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerOperationsApi } from '../../../jobs/http/operations-api.ts';
import { HttpServer } from '../../../jobs/http/server.ts';
import { OutOfBandRedrive } from '../../../jobs/notify/out-of-band-redrive.ts';
import {
  BOOK,
  booking,
  quietLog,
  startHarness,
  type Harness,
} from '../../support/action-harness.ts';
import { HttpReceiver } from '../../support/http-receiver.ts';
import { startTestOperatorServer, type TestOperatorServer } from '../../support/operator-api.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-redrive';
const ATTEMPTS = 3;
const receiver = new HttpReceiver();
let h: Harness;
let http: HttpServer;
let api: TestOperatorServer;
let base: string;

beforeAll(async () => {
  process.env.CALLGATE_TEST_REDRIVE_SECRET = 'whsec_redrive_test';
  await receiver.up();
  h = await startHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    tenantSettings: () => ({
      [TENANT]: {
        notify: {
          webhookUrl: `${receiver.url}/hook`,
          webhookSecretEnv: 'CALLGATE_TEST_REDRIVE_SECRET',
          sms: 'none',
          retry: { attempts: ATTEMPTS, backoffMs: 20, maxBackoffMs: 40 },
        },
      },
    }),
  });
  http = new HttpServer();
  api = await startTestOperatorServer((server) =>
    registerOperationsApi(server, {
      ledger: h.layer.ledger,
      queues: h.layer.queues,
      outOfBand: h.layer.outOfBand,
      tenants: [TENANT],
    }),
  );
  http.addMetricsRefresher(() => h.layer.refreshMetrics());
  base = `http://127.0.0.1:${(await http.listen(0, '127.0.0.1')).port}`;
});
afterAll(async () => {
  await api.close();
  await http.close();
  await h.close();
  await receiver.down();
  delete process.env.CALLGATE_TEST_REDRIVE_SECRET;
});

/** A committed booking whose result went out of band while the receiver answers 503. */
async function givenUpMessage(): Promise<string> {
  receiver.status = 503;
  const decision = await h.layer.admit({
    tenantId: TENANT,
    action: 'book_table',
    args: booking(),
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(decision.type);
  const op = await h.layer.waitFor(TENANT, decision.operationId, 10_000);
  if (op?.state !== 'COMMITTED') throw new Error(`the booking ended ${String(op?.state)}`);
  await h.layer.outOfBand.enqueue({
    operationId: op.operationId,
    tenantId: TENANT,
    sessionId: op.scope.sessionId,
    caller: '+15550142',
    state: op.state,
    text: 'Your table is booked.',
    reasons: ['caller_hung_up', 'committed'],
  });
  await waitFor(
    async () =>
      (await h.layer.ledger.get(TENANT, op.operationId))?.outOfBand?.webhook?.state === 'gave_up'
        ? true
        : undefined,
    10_000,
    'the message to give up',
  );
  return op.operationId;
}

async function metric(line: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? 0 : Number(found.slice(line.length + 1));
}

const GAVE_UP = 'callgate_out_of_band_deliveries_total{channel="webhook",outcome="gave_up"}';
const GIVEN_UP = `callgate_out_of_band_given_up{tenant="${TENANT}"}`;

describe('when a webhook message exhausts its retries', () => {
  it('should show gave_up on the operation and in the metrics, and deliver once when an operator re-drives it', async () => {
    const gaveUpBefore = await metric(GAVE_UP);
    const id = await givenUpMessage();
    const key = `oob-${id}-webhook`;
    const op = await h.layer.ledger.get(TENANT, id);
    expect(op?.outOfBand?.webhook).toMatchObject({
      state: 'gave_up',
      attempts: ATTEMPTS,
      error: 'webhook answered 503',
      redrives: 0,
    });
    expect(receiver.withKey(key)).toHaveLength(ATTEMPTS);
    expect(await metric(GAVE_UP)).toBe(gaveUpBefore + 1);
    expect(await metric(GIVEN_UP)).toBe(1);
    const viewed = (await (await api.fetch(`/v1/operations/${id}`)).json()) as {
      operation: { out_of_band: unknown };
    };
    expect(viewed.operation.out_of_band).toMatchObject({ webhook: { state: 'gave_up' } });

    // A later enqueue of the same result (a duplicate event) sends nothing more.
    await h.layer.outOfBand.enqueue({
      operationId: id,
      tenantId: TENANT,
      sessionId: 'sess-dup',
      state: 'COMMITTED',
      text: 'Your table is booked.',
      reasons: [],
    });

    receiver.status = 200;
    const redriven = await api.fetch(`/v1/operations/${id}/notify/redrive`, { method: 'POST' });
    expect(redriven.status).toBe(202);
    expect(((await redriven.json()) as { redrive: unknown }).redrive).toEqual({
      webhook: 'requeued',
    });
    const delivered = await waitFor(
      async () => {
        const current = await h.layer.ledger.get(TENANT, id);
        return current?.outOfBand?.webhook?.state === 'delivered' ? current : undefined;
      },
      10_000,
      'the re-driven message',
    );
    expect(delivered.outOfBand?.webhook).toMatchObject({
      state: 'delivered',
      attempts: 1,
      redrives: 1,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.accepted(key)).toHaveLength(1);
    expect(receiver.withKey(key)).toHaveLength(ATTEMPTS + 1);
    expect(await metric(GIVEN_UP)).toBe(0);

    // Nothing left to re-drive: refused, and nothing is sent again.
    const again = await api.fetch(`/v1/operations/${id}/notify/redrive`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe(
      'CALLGATE_ERR_OOB_REDRIVE_REFUSED',
    );
    expect(receiver.withKey(key)).toHaveLength(ATTEMPTS + 1);
  });
});

describe('when the automatic re-drive pass finds a message that gave up', () => {
  it('should queue it again within its bound and only while it is younger than the horizon', async () => {
    const id = await givenUpMessage();
    const key = `oob-${id}-webhook`;
    const pass = new OutOfBandRedrive({
      records: h.layer.outOfBand.records,
      queue: h.layer.outOfBand,
      tenants: [TENANT],
      log: quietLog,
      maxRedrives: 1,
      maxAgeMs: 3_600_000,
    });

    // Beyond the horizon it is left to an operator.
    expect(await pass.pass(Date.now() + 2 * 3_600_000)).toBe(0);
    expect((await h.layer.ledger.get(TENANT, id))?.outOfBand?.webhook?.state).toBe('gave_up');

    // Within it, one pass and one pass only queues it again (the receiver still fails).
    const [first, second] = await Promise.all([pass.pass(), pass.pass()]);
    expect((first ?? 0) + (second ?? 0)).toBe(1);
    await waitFor(
      async () => {
        const webhook = (await h.layer.ledger.get(TENANT, id))?.outOfBand?.webhook;
        return webhook?.state === 'gave_up' && webhook.redrives === 1 ? true : undefined;
      },
      10_000,
      'the re-driven message to give up again',
    );
    expect(receiver.withKey(key)).toHaveLength(2 * ATTEMPTS);

    // The bound is reached: the pass leaves it; an operator still can.
    receiver.status = 200;
    expect(await pass.pass()).toBe(0);
    const redriven = await api.fetch(`/v1/operations/${id}/notify/redrive`, { method: 'POST' });
    expect(redriven.status).toBe(202);
    await waitFor(
      async () =>
        (await h.layer.ledger.get(TENANT, id))?.outOfBand?.webhook?.state === 'delivered'
          ? true
          : undefined,
      10_000,
      'the message delivered',
    );
    expect(receiver.accepted(key)).toHaveLength(1);
  });
});
