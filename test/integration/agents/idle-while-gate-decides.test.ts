/**
 * Race: a result's gate decision is taken while the agent is talking (speak when idle), and the
 * agent's response ends before that decision is acted on. The call's idle signal for that end came
 * while nothing was pending, and no other is coming on a quiet line: the result must still be told
 * then, not wait for the caller to speak again or for the call to end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../../agents/audit.ts';
import { BOOK, booking } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-idle-race';
let a: AgentsHarness;

beforeAll(async () => {
  a = await startAgentsHarness({ tenants: { [TENANT]: { book_table: BOOK } } });
});
afterAll(async () => a.close());

describe('when the agent stops talking while the gate decides to speak a result when idle', () => {
  it('should tell the result once the call is idle, with no further idle signal', async () => {
    let responding = true;
    const { session, port } = a.call(TENANT, undefined, { responseActive: () => responding });
    // The response ends while the decision is recorded: after the gate's snapshot, before delivery acts on it.
    const record = a.audit.record.bind(a.audit);
    a.audit.record = async (sessionId: string, event: AuditEvent, turnId?: number) => {
      if (
        sessionId === session.sessionId &&
        event.type === 'gate_decision' &&
        event.decision === 'speak_when_idle'
      )
        responding = false;
      return record(sessionId, event, turnId);
    };
    const output = await a.runtime.handle(session, {
      callId: 'c-idle-race',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'trattoria-roma',
        time: '18:00',
        party_size: 2,
        name: 'Ada',
      },
    });
    const id = String(output.operation_id);

    await waitFor(
      async () => (port.completed(id).length > 0 ? true : undefined),
      10_000,
      'the result told once the call was idle',
    );
    const op = await a.h.layer.ledger.get(TENANT, id);
    expect(op?.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
    expect(port.spoken.filter((s) => s.operationId === id)).toHaveLength(1);
    const decisions = (await a.audit.read(session.sessionId))
      .map((r) => r.event)
      .filter((e) => e.type === 'gate_decision');
    expect(decisions.map((e) => (e.type === 'gate_decision' ? e.decision : undefined))).toEqual([
      'speak_when_idle',
      'speak_now',
    ]);
  });
});
