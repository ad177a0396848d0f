/**
 * Race: a result event arrives again (a redelivery) while its first copy is being spoken. Being
 * spoken is not told: the duplicate waits, and its record must not replace the record of the
 * delivery in progress. When that speech is then cut off (barge-in) and the caller hangs up, the
 * result is still owed and goes out of band, once. And a hang-up that ends the speech in the same
 * moment finds the result owed too (it is judged after the speech ended, not during it). Real
 * Redis, workers and sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import type { ConversationPort, SpokenOutcome } from '../../../agents/result-delivery.ts';
import { BOOK, booking } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

const TENANT = 'tenant-dup-live';

let a: AgentsHarness;
const redis = testRedis();
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    gatewayId: 'gw-dup',
  });
});
afterAll(async () => {
  redis.disconnect();
  await a.close();
});

/** A port whose first response runs until `bargeIn()` cuts it off; what it was asked to say is kept. */
class InterruptiblePort implements ConversationPort {
  readonly asked: string[] = [];
  private cut: (() => void) | undefined;

  async deliver(result: { operationId: string }): Promise<SpokenOutcome> {
    this.asked.push(result.operationId);
    await new Promise<void>((resolve) => (this.cut = resolve));
    return { status: 'cancelled', responseId: `resp_${this.asked.length}` };
  }

  bargeIn(): void {
    this.cut?.();
  }
}

describe('when a duplicate result event arrives while the first copy is being spoken', () => {
  it('should keep the delivery in progress, and after a barge-in and a hang-up send the result out of band once', async () => {
    const session = new AgentSession({
      sessionId: 'dup-during-speech',
      tenantId: TENANT,
      caller: '+15550177',
      ownerGateway: 'gw-dup',
      agent: 'reservations',
    });
    const port = new InterruptiblePort();
    a.delivery.attach(session, port);
    const out = await a.runtime.handle(session, {
      callId: 'c-dup',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'bistro-nord',
        time: '19:00',
        party_size: 2,
        name: 'Lin',
      },
    });
    const id = String(out.operation_id);
    await waitFor(
      async () => (port.asked.length > 0 ? true : undefined),
      10_000,
      'the result being spoken',
    );

    // The entry stays in the stream while it is spoken; the same event is added again.
    const key = a.delivery.streamKey(TENANT);
    const original = (await redis.xrange(key, '-', '+')).find(([, fields]) => fields.includes(id));
    expect(original).toBeDefined();
    const decisions = async () =>
      (await a.audit.read(session.sessionId)).flatMap((r) =>
        r.event.type === 'gate_decision' ? [r.event] : [],
      );
    const before = (await decisions()).length;
    await redis.xadd(key, '*', ...(original?.[1] ?? []));
    const after = await waitFor(
      async () => {
        const all = await decisions();
        return all.length > before ? all.slice(before) : undefined;
      },
      5_000,
      'the gate decision on the duplicate',
    );
    // Being spoken is not told: the duplicate waits like any result while a response plays.
    expect(after).toEqual([
      expect.objectContaining({
        decision: 'speak_when_idle',
        reasons: expect.arrayContaining(['response_active']) as unknown,
      }),
    ]);
    // The record still says the result is on its way, not that it was judged already told.
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({ delivered: false });
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery?.decision).not.toBe('suppress');

    port.bargeIn();
    await waitFor(
      async () =>
        (await a.audit.read(session.sessionId)).some((r) => r.event.type === 'delivery_interrupted')
          ? true
          : undefined,
      5_000,
      'the interruption',
    );
    await a.delivery.onCallEnded(session.sessionId, 'hung_up');

    expect(await messagesOnceSettled(a.h.sandbox.url, id, { settleMs: 500 })).toEqual([
      expect.objectContaining({ deliveries: 1 }),
    ]);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      channel: 'out_of_band',
      reasons: expect.arrayContaining(['caller_hung_up']) as unknown,
    });
    // Spoken once (cut off), never again; both stream entries are settled.
    expect(port.asked).toEqual([id]);
    expect(await redis.xlen(key)).toBe(0);
  });
});

describe('when the caller hangs up in the same moment the speech of a result is ended by it', () => {
  it('should judge the result after the speech ended and send it out of band once', async () => {
    const session = new AgentSession({
      sessionId: 'hangup-during-speech',
      tenantId: TENANT,
      caller: '+15550178',
      ownerGateway: 'gw-dup',
      agent: 'reservations',
    });
    const port = new InterruptiblePort();
    a.delivery.attach(session, port);
    const out = await a.runtime.handle(session, {
      callId: 'c-hang',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'bistro-nord',
        time: '20:30',
        party_size: 2,
        name: 'Ada',
      },
    });
    const id = String(out.operation_id);
    await waitFor(
      async () => (port.asked.length > 0 ? true : undefined),
      10_000,
      'the result being spoken',
    );
    // The hang-up ends the speech and hands the call over in one tick, as a call's end does.
    port.bargeIn();
    await a.delivery.onCallEnded(session.sessionId, 'hung_up');

    expect(await messagesOnceSettled(a.h.sandbox.url, id, { settleMs: 500 })).toEqual([
      expect.objectContaining({ deliveries: 1 }),
    ]);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      reasons: expect.arrayContaining(['caller_hung_up']) as unknown,
    });
  });
});
