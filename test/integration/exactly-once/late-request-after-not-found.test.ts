/**
 * Class: "not found" trusted while a request can still arrive. A refund held by a slow proxy past
 * the provider timeout and the reconcile grace is not at the sandbox when reconciliation asks, so
 * the lookup says "not found". callgate resends only after the provider voided the held attempt's
 * token: the held request, released after the resend committed, is refused and makes no refund.
 * A provider that cannot void keeps the operation UNKNOWN for an operator instead of resending.
 * Real worker process, the sandbox over HTTP behind a holding proxy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operation } from '../../../jobs/ledger/operation.ts';
import { BOOK, booking, REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { startHoldingProxy, type HoldingProxy } from '../../support/holding-proxy.ts';
import { waitFor, type StartedProcess } from '../../support/processes.ts';
import { startWorkerProcess, stopWorkerProcess } from '../../support/worker-process.ts';

const VOIDING = 'tenant-voiding';
const NO_VOID = 'tenant-no-void';
const KEYED = 'tenant-keyed-bookings';

let sandboxUrl = '';
let proxy: HoldingProxy;
let h: Harness;
let worker: StartedProcess;
beforeAll(async () => {
  // The first refund request is held: its client gives up at the provider timeout (1 s).
  proxy = await startHoldingProxy(
    () => sandboxUrl,
    (method, path, n) =>
      method === 'POST' && (path === '/payments/refund' || path === '/bookings/book') && n === 1,
  );
  h = await startHarness({
    tenants: {
      [VOIDING]: { refund: { ...REFUND, provider: 'payments_proxied' } },
      [NO_VOID]: { refund: { ...REFUND, provider: 'payments_proxied_no_void' } },
      [KEYED]: { book_table: { ...BOOK, provider: 'bookings_proxied' } },
    },
    workers: false,
    providers: (url) => {
      sandboxUrl = url;
      return {
        payments_proxied: {
          type: 'http',
          baseUrl: `${proxy.url}/payments`,
          honoursIdempotencyKeys: false,
          supportsVoid: true,
          timeoutMs: 1_000,
        },
        payments_proxied_no_void: {
          type: 'http',
          baseUrl: `${proxy.url}/payments`,
          honoursIdempotencyKeys: false,
          supportsVoid: false,
          timeoutMs: 1_000,
        },
        bookings_proxied: {
          type: 'http',
          baseUrl: `${proxy.url}/bookings`,
          honoursIdempotencyKeys: true,
          supportsVoid: true,
          timeoutMs: 1_000,
        },
      };
    },
  });
  worker = await startWorkerProcess(h);
});
afterAll(async () => {
  await stopWorkerProcess(worker);
  await h.close();
  await proxy.close();
});

async function refund(tenantId: string, order: string): Promise<string> {
  const decision = await h.layer.admit({
    tenantId,
    action: 'refund',
    args: { order_id: order, amount_cents: 700 },
    scope: h.scope(),
  });
  if (decision.type !== 'started') throw new Error(decision.type);
  return decision.operationId;
}

function until(
  tenantId: string,
  id: string,
  done: (op: Operation) => boolean,
  what: string,
): Promise<Operation> {
  return waitFor(
    async () => {
      const op = await h.layer.ledger.get(tenantId, id);
      return op !== undefined && done(op) ? op : undefined;
    },
    20_000,
    what,
  );
}

describe('when the provider voids attempts', () => {
  it('should resend only after voiding the held attempt, whose late arrival makes no refund', async () => {
    const id = await refund(VOIDING, 'ord_1010');
    const op = await until(VOIDING, id, (o) => o.state === 'COMMITTED', 'the resend to commit');
    expect(proxy.held()).toBe(1);
    // The held first attempt arrives now, after the resend committed.
    proxy.release();
    await waitFor(
      async () => (proxy.releasedAnswers.length === 1 ? true : undefined),
      5_000,
      'the held request to be answered',
    );
    expect(proxy.releasedAnswers[0]?.status).toBe(410);
    expect(proxy.releasedAnswers[0]?.body).toContain('attempt_voided');

    const effects = await h.sandbox.effects({ reference: id });
    expect(effects).toHaveLength(1);
    expect(op.attempt).toBe(2);
    expect(op.attemptTokens).toHaveLength(2);
    const reasons = (await h.layer.ledger.history(VOIDING, id)).map(
      (e) => `${e.state}:${e.reason}`,
    );
    expect(reasons).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^UNKNOWN:/),
        'FAILED_RETRYABLE:reconciled_not_found',
        'COMMITTED:provider_committed',
      ]),
    );
  });
});

describe('when the provider cannot void attempts', () => {
  it('should keep the operation UNKNOWN for an operator and never send it again', async () => {
    const id = await refund(NO_VOID, 'ord_1011');
    const op = await until(NO_VOID, id, (o) => o.state === 'UNKNOWN', 'UNKNOWN');
    await waitFor(
      async () =>
        (await h.layer.ledger.rawField(op, 'reconcile_stuck_reason')) === 'not_found_cannot_void'
          ? true
          : undefined,
      15_000,
      'the operation to be left for an operator',
    );
    const answered = proxy.releasedAnswers.length;
    proxy.release();
    await waitFor(
      async () => (proxy.releasedAnswers.length > answered ? true : undefined),
      5_000,
      'the held request to be answered',
    );

    // The one request there ever was took effect late; callgate never sent a second.
    expect((await h.sandbox.counts()).requests[id]).toBe(1);
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(1);
    expect(await h.layer.ledger.get(NO_VOID, id)).toMatchObject({ state: 'UNKNOWN', attempt: 1 });
  });
});

describe('when a provider with idempotency keys also voids attempts', () => {
  it('should void the held attempt before the retry, so it is refused when it arrives and never runs beside it', async () => {
    const decision = await h.layer.admit({
      tenantId: KEYED,
      action: 'book_table',
      args: booking({ time: '13:30' }),
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const id = decision.operationId;
    const op = await until(KEYED, id, (o) => o.state === 'COMMITTED', 'the retry to commit');
    const answered = proxy.releasedAnswers.length;
    proxy.release();
    await waitFor(
      async () => (proxy.releasedAnswers.length > answered ? true : undefined),
      5_000,
      'the held request to be answered',
    );
    expect(proxy.releasedAnswers.at(-1)?.status).toBe(410);
    expect(op.attempt).toBe(2);
    expect(await h.sandbox.effects({ reference: id })).toHaveLength(1);
    expect((await h.sandbox.concurrency()).tenants[KEYED]?.operations.book?.max).toBe(1);
  });
});
