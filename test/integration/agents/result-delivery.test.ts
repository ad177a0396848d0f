import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AVAILABILITY,
  BOOK,
  booking,
  CANCEL_BOOKING,
  REFUND,
} from '../../support/action-harness.ts';
import { messages, startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';

let a: AgentsHarness;

beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: {
      'tenant-chat': {
        book_table: BOOK,
        cancel_booking: CANCEL_BOOKING,
        refund: REFUND,
        check_availability: AVAILABILITY,
      },
    },
  });
});
afterAll(async () => a.close());

const TENANT = 'tenant-chat';
const bookArgs = (time: string, date = booking().date as string) => ({
  restaurant: 'trattoria-roma',
  date,
  time,
  party_size: 2,
  name: 'Ada',
});

async function book(
  session: ReturnType<AgentsHarness['call']>['session'],
  args: Record<string, unknown>,
  callId = `call_${Math.random()}`,
): Promise<string> {
  const output = await a.runtime.handle(session, { callId, name: 'book_table', arguments: args });
  if (output.status !== 'started') throw new Error(`book_table answered ${JSON.stringify(output)}`);
  return String(output.operation_id);
}

async function decisionOf(operationId: string): Promise<string | undefined> {
  return (await a.h.layer.ledger.get(TENANT, operationId))?.delivery?.decision;
}

describe('when a booking commits while the caller is silent', () => {
  it('should speak it once, record the response and mark it delivered', async () => {
    const { session, port } = a.call(TENANT);
    const id = await book(session, bookArgs('19:00'));
    await waitFor(
      async () => (port.completed(id).length > 0 ? true : undefined),
      10_000,
      'the spoken result',
    );
    const op = await a.h.layer.ledger.get(TENANT, id);
    expect(op?.delivery).toMatchObject({
      decision: 'spoken',
      channel: 'voice',
      delivered: true,
      responseId: 'resp_1',
    });
    expect(port.completed(id)[0]?.message).toContain('went through');
    expect(op?.delivery?.commitToAudibleMs).toBeGreaterThanOrEqual(0);
    const audit = (await a.audit.read(session.sessionId)).map((r) => r.event.type);
    expect(audit).toEqual(['tool_requested', 'tool_answered', 'gate_decision', 'delivered']);
  });
});

describe('when a read is answered inside the tool output', () => {
  /** The read's operation id, from the result event its terminal transition appended for `sessionId`. */
  async function readEventOperation(sessionId: string): Promise<string> {
    const redis = testRedis();
    const events = await redis.xrange(a.delivery.streamKey(TENANT), '-', '+');
    redis.disconnect();
    const readEvent = events.reverse().find(([, fields]) => fields.includes(sessionId));
    expect(readEvent).toBeDefined();
    return readEvent?.[1][readEvent[1].indexOf('operation_id') + 1] ?? '';
  }

  it('should not speak its result event again once the response speaking the output played: the gate finds it told', async () => {
    const { session, port } = a.call(TENANT);
    const output = await a.runtime.handle(session, {
      callId: 'call_avail',
      name: 'check_availability',
      arguments: { restaurant: 'trattoria-roma', date: booking().date, party_size: 2 },
    });
    expect(output.status).toBe('ok');
    const operationId = await readEventOperation(session.sessionId);
    expect(a.runtime.inlineAnswer(session, 'call_avail')).toBe(operationId);
    // Not told yet: the output has not reached the caller, and its result event is held meanwhile.
    await a.delivery.onIdle(session.sessionId);
    expect((await a.h.layer.ledger.get(TENANT, operationId))?.delivery).toBeUndefined();
    // The call's response that spoke the output played to its end; then the call is idle.
    await a.runtime.settleInlineAnswer(session, 'call_avail', {
      status: 'completed',
      responseId: 'resp_inline',
      firstAudioAt: Date.now(),
    });
    await a.delivery.onIdle(session.sessionId);
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(port.spoken.filter((s) => s.operationId === operationId)).toEqual([]);
    const op = await a.h.layer.ledger.get(TENANT, operationId);
    expect(op?.delivery).toMatchObject({
      decision: 'told_in_tool_output',
      delivered: true,
      responseId: 'resp_inline',
    });
    expect(session.operations.get(operationId)?.told).toBe(true);
  });

  it('should speak it as a result when the response speaking the output was cut', async () => {
    const { session, port } = a.call(TENANT);
    const output = await a.runtime.handle(session, {
      callId: 'call_avail_cut',
      name: 'check_availability',
      arguments: { restaurant: 'trattoria-roma', date: booking().date, party_size: 2 },
    });
    expect(output.status).toBe('ok');
    const operationId = await readEventOperation(session.sessionId);
    await a.runtime.settleInlineAnswer(session, 'call_avail_cut', {
      status: 'cancelled',
      responseId: 'resp_cut',
    });
    await waitFor(
      async () => {
        await a.delivery.onIdle(session.sessionId);
        return port.completed(operationId).length > 0 ? true : undefined;
      },
      10_000,
      'the read spoken as a result',
    );
    expect(port.completed(operationId)).toHaveLength(1);
    expect((await a.h.layer.ledger.get(TENANT, operationId))?.delivery).toMatchObject({
      decision: 'spoken',
      delivered: true,
    });
  });
});

describe('when the same result event arrives twice', () => {
  it('should speak it once', async () => {
    const { session, port } = a.call(TENANT);
    const id = await book(session, bookArgs('19:30'));
    await waitFor(
      async () => (port.completed(id).length > 0 ? true : undefined),
      10_000,
      'the spoken result',
    );
    // Replay the event as a duplicate delivery would (the original entry went with its
    // acknowledgement once spoken, so it is written again from the operation).
    const redis = testRedis();
    const key = a.delivery.streamKey(TENANT);
    const op = await a.h.layer.ledger.require(TENANT, id);
    await redis.xadd(
      key,
      '*',
      'event_id',
      'ev_replayed',
      'operation_id',
      id,
      'tenant_id',
      TENANT,
      'session_id',
      session.sessionId,
      'state',
      op.state,
      'attempt',
      String(op.attempt),
      'at',
      String(Date.now()),
    );
    redis.disconnect();
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(port.spoken.filter((s) => s.operationId === id)).toHaveLength(1);
    expect(await decisionOf(id)).toBe('spoken');
  });
});

describe('when the caller changes the booking time while the first booking is running', () => {
  it('should cancel the first at the provider and suppress its result, speaking only the new one', async () => {
    const { session, port } = a.call(TENANT);
    const date = booking().date as string;
    await a.h.sandbox.addRule({
      fault: 'latency=600,cancel=on',
      tenant: TENANT,
      operation: 'book',
      nth: 1,
    });
    const first = await book(session, bookArgs('21:00', date));
    await new Promise((resolve) => setTimeout(resolve, 150));
    const second = await book(session, bookArgs('21:30', date));
    await waitFor(
      async () => (port.completed(second).length > 0 ? true : undefined),
      10_000,
      'the new booking spoken',
    );
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, first))?.state === 'CANCELLED' ? true : undefined,
      10_000,
      'the first cancelled',
    );
    await waitFor(
      async () => ((await decisionOf(first)) === 'suppress' ? true : undefined),
      5_000,
      'the first suppressed',
    );
    expect(port.spoken.filter((s) => s.operationId === first)).toHaveLength(0);
    expect(await a.h.sandbox.effects({ reference: first })).toHaveLength(0);
    expect((await a.h.layer.ledger.get(TENANT, first))?.delivery?.reasons).toContain(
      'superseded_no_effect',
    );
    // Hanging up later owes nothing for it: no second decision, no message.
    await a.delivery.onCallEnded(session.sessionId, 'hung_up');
    const decisions = (await a.audit.read(session.sessionId)).filter(
      (r) =>
        r.event.type === 'gate_decision' &&
        (r.event as { operationId?: string }).operationId === first,
    );
    expect(decisions).toHaveLength(1);
    expect(await messages(a.h, first)).toEqual([]);
  });

  it('should tell the caller the truth when the first booking committed anyway', async () => {
    const { session, port } = a.call(TENANT);
    const date = booking().date as string;
    await a.h.sandbox.addRule({
      fault: 'latency=500,cancel=off',
      tenant: TENANT,
      operation: 'book',
      nth: 1,
    });
    await a.h.sandbox.addRule({ fault: 'cancel=off', tenant: TENANT, operation: 'cancel' });
    const first = await book(session, bookArgs('20:00', date));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const second = await book(session, bookArgs('20:30', date));
    await waitFor(
      async () => (port.completed(first).length > 0 ? true : undefined),
      10_000,
      'the late first result spoken',
    );
    expect((await a.h.layer.ledger.get(TENANT, first))?.state).toBe('COMMITTED');
    expect(port.completed(first)[0]?.message).toContain('did happen anyway');
    expect((await a.h.layer.ledger.get(TENANT, first))?.delivery?.reasons).toContain(
      'superseded_with_effect',
    );
    await waitFor(
      async () => (port.completed(second).length > 0 ? true : undefined),
      10_000,
      'the second spoken',
    );
  });
});

describe('when the caller barges in during the spoken acknowledgement', () => {
  it('should deliver it again once the caller is idle, and count it delivered only then', async () => {
    const { session, port } = a.call(TENANT);
    port.cutOff = 1;
    const id = await book(session, bookArgs('18:00'));
    await waitFor(
      async () => (port.spoken.some((s) => s.operationId === id) ? true : undefined),
      10_000,
      'the first attempt',
    );
    expect(port.spoken[0]).toMatchObject({ operationId: id, status: 'cancelled' });
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery?.delivered).toBe(false);
    await a.delivery.onIdle(session.sessionId);
    expect(port.completed(id)).toHaveLength(1);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'spoken',
      delivered: true,
    });
    expect((await a.audit.read(session.sessionId)).map((r) => r.event.type)).toContain(
      'delivery_interrupted',
    );
  });
});

describe('when the call was handed to another agent before the result came', () => {
  it('should let an agent that may reveal it say it', async () => {
    const { session, port } = a.call(TENANT);
    await a.h.sandbox.addRule({ fault: 'latency=300', tenant: TENANT, operation: 'book', nth: 1 });
    const id = await book(session, bookArgs('17:00'));
    expect(
      await a.runtime.handle(session, {
        callId: 'c-h1',
        name: 'handoff',
        arguments: { agent: 'concierge' },
      }),
    ).toMatchObject({ status: 'ok', pending_operations: 1 });
    await waitFor(
      async () => (port.completed(id).length > 0 ? true : undefined),
      10_000,
      'the routed result',
    );
    const op = await a.h.layer.ledger.get(TENANT, id);
    expect(op?.delivery).toMatchObject({ decision: 'spoken', agent: 'concierge' });
    const gate = (await a.audit.read(session.sessionId)).find(
      (r) => r.event.type === 'gate_decision',
    );
    expect(gate?.event).toMatchObject({ decision: 'route_to_active_agent', agent: 'concierge' });
  });

  it('should send it out of band when the active agent may not reveal it', async () => {
    const { session, port } = a.call(TENANT);
    await a.h.sandbox.addRule({ fault: 'latency=300', tenant: TENANT, operation: 'book', nth: 1 });
    const id = await book(session, bookArgs('16:00'));
    await a.runtime.handle(session, {
      callId: 'c-h2',
      name: 'handoff',
      arguments: { agent: 'billing' },
    });
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the out-of-band message',
    );
    expect(port.spoken.filter((s) => s.operationId === id)).toHaveLength(0);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      reasons: ['handoff_agent_may_not_reveal', 'committed'],
    });
  });
});

describe('when the caller hangs up before the commit', () => {
  it('should send exactly one out-of-band message and speak nothing', async () => {
    const { session, port } = a.call(TENANT);
    await a.h.sandbox.addRule({ fault: 'latency=400', tenant: TENANT, operation: 'book', nth: 1 });
    const id = await book(session, bookArgs('15:00'));
    await a.delivery.onCallEnded(session.sessionId, 'hung_up');
    await waitFor(
      async () => ((await messages(a.h, id)).length > 0 ? true : undefined),
      10_000,
      'the message',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const sent = await messages(a.h, id);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.deliveries).toBe(1);
    expect(String(sent[0]?.body.text)).toContain('is confirmed');
    expect(port.spoken).toHaveLength(0);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      channel: 'out_of_band',
      reasons: ['caller_hung_up', 'committed'],
    });
  });
});
