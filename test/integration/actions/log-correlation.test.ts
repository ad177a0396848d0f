import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor } from '../../support/processes.ts';

const lines: Record<string, unknown>[] = [];
let h: Harness;
beforeAll(async () => {
  const log = new Logger({
    level: 'info',
    sink: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  h = await startHarness({ tenants: { 'tenant-logs': { refund: { ...REFUND } } }, log });
});
afterAll(async () => h.close());

describe('when an operation is executed, goes UNKNOWN and is reconciled', () => {
  it('should carry the session, turn, model response, model call id, operation id and key on every worker log line about it', async () => {
    await h.sandbox.addRule({
      fault: 'commit-then-timeout=3000',
      tenant: 'tenant-logs',
      operation: 'refund',
      nth: 1,
    });
    const scope = h.scope({
      turnId: 'turn-42',
      responseId: 'resp_abc',
      providerCallId: 'call_xyz',
    });
    const decision = await h.layer.admit({
      tenantId: 'tenant-logs',
      action: 'refund',
      args: { order_id: 'ord_1010', amount_cents: 100, reason: 'late' },
      scope,
    });
    if (decision.type !== 'started') throw new Error(decision.type);
    const op = await h.layer.waitFor('tenant-logs', decision.operationId, 15_000);
    expect(op?.state).toBe('COMMITTED');

    const linesAbout = () => lines.filter((line) => line.operation_id === decision.operationId);
    // The reconciler logs its resolution after the transition the wait above saw.
    await waitFor(
      async () =>
        linesAbout().some((line) => line.msg === 'operation reconciled') ? true : undefined,
      5_000,
      'the reconciler to log its resolution',
    );
    const about = linesAbout();
    // The executor's "outcome unknown" and the reconciler's resolution, at least.
    expect(about.map((line) => line.msg)).toEqual(
      expect.arrayContaining(['operation outcome unknown; reconciling', 'operation reconciled']),
    );
    for (const line of about) {
      expect(line).toMatchObject({
        session_id: scope.sessionId,
        turn_id: 'turn-42',
        response_id: 'resp_abc',
        provider_call_id: 'call_xyz',
        idempotency_key: decision.idempotencyKey,
        tenant_id: 'tenant-logs',
        action: 'refund',
      });
    }
  });
});
