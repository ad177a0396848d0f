import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerOperationsApi } from '../../../jobs/http/operations-api.ts';
import { BOOK, booking, REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { startTestOperatorServer, type TestOperatorServer } from '../../support/operator-api.ts';

let h: Harness;
let api: TestOperatorServer;

beforeAll(async () => {
  h = await startHarness({
    tenants: { 'tenant-api': { book_table: BOOK, refund: REFUND } },
    worker: { reconcileGraceMs: 60_000, reconcileBackoffMs: 60_000, reconcileMaxBackoffMs: 60_000 },
  });
  api = await startTestOperatorServer((server) =>
    registerOperationsApi(server, {
      ledger: h.layer.ledger,
      queues: h.layer.queues,
      outOfBand: h.layer.outOfBand,
      tenants: ['tenant-api'],
    }),
  );
});
afterAll(async () => {
  await api.close();
  await h.close();
});

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await api.fetch(path);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('when an operator looks an operation up', () => {
  it('should show state, history, result and correlation ids by id, by session and by idempotency key', async () => {
    const scope = h.scope({ providerCallId: 'call_api', turnId: 'turn-7' });
    const decision = await h.layer.admit({
      tenantId: 'tenant-api',
      action: 'book_table',
      args: booking(),
      scope,
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    await h.layer.waitFor('tenant-api', decision.operationId, 10_000);
    const one = await get(`/v1/operations/${decision.operationId}`);
    expect(one.status).toBe(200);
    expect(one.body.operation).toMatchObject({
      operation_id: decision.operationId,
      state: 'COMMITTED',
      session_id: scope.sessionId,
      turn_id: 'turn-7',
      provider_call_id: 'call_api',
      idempotency_key: decision.idempotencyKey,
    });
    expect((one.body.history as { state: string }[]).map((e) => e.state)).toEqual([
      'REQUESTED',
      'ADMITTED',
      'RUNNING',
      'COMMITTED',
    ]);
    const bySession = await get(`/v1/operations?session_id=${scope.sessionId}`);
    expect(
      (bySession.body.operations as { operation_id: string }[]).map((o) => o.operation_id),
    ).toEqual([decision.operationId]);
    const byKey = await get(
      `/v1/operations?idempotency_key=${decision.idempotencyKey}&tenant=tenant-api`,
    );
    expect(
      (byKey.body.operations as { operation_id: string }[]).map((o) => o.operation_id),
    ).toEqual([decision.operationId]);
  });

  it('should answer 404 with an error code for an unknown id, and 400 for a list without a filter', async () => {
    expect(await get('/v1/operations/op_nope')).toEqual({
      status: 404,
      body: {
        error: { code: 'CALLGATE_ERR_OP_NOT_FOUND', message: 'operation op_nope does not exist' },
      },
    });
    expect((await get('/v1/operations')).status).toBe(400);
    expect((await get('/v1/operations?session_id=x&tenant=other')).status).toBe(404);
  });
});

describe('when an operator reconciles an UNKNOWN operation by hand', () => {
  it('should list it under state=UNKNOWN, and resolve it on POST /reconcile', async () => {
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=2000',
      tenant: 'tenant-api',
      operation: 'refund',
      nth: 1,
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-api',
      action: 'refund',
      args: { order_id: 'ord_1020', amount_cents: 50 },
      scope: h.scope(),
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const unknown = await h.layer.waitFor('tenant-api', decision.operationId, 10_000, true);
    expect(unknown?.state).toBe('UNKNOWN');
    const listed = await get('/v1/operations?state=UNKNOWN');
    expect(
      (listed.body.operations as { operation_id: string }[]).map((o) => o.operation_id),
    ).toContain(decision.operationId);
    const refused = await api.fetch(`/v1/operations/op_nope/reconcile`, { method: 'POST' });
    expect(refused.status).toBe(404);
    const response = await api.fetch(`/v1/operations/${decision.operationId}/reconcile`, {
      method: 'POST',
    });
    expect(response.status).toBe(202);
    const op = await h.layer.waitFor('tenant-api', decision.operationId, 10_000);
    expect(op?.state).toBe('COMMITTED');
    const again = await api.fetch(`/v1/operations/${decision.operationId}/reconcile`, {
      method: 'POST',
    });
    expect(again.status).toBe(409);
  });
});
