import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { ResultDelivery } from '../../../agents/result-delivery.ts';
import { ToolRuntime } from '../../../agents/tool-runtime.ts';
import { AVAILABILITY, quietLog } from '../../support/action-harness.ts';
import {
  RecordingPort,
  startAgentsHarness,
  type AgentsHarness,
} from '../../support/agents-harness.ts';
import { testRedis } from '../../support/redis.ts';
import { waitFor } from '../../support/processes.ts';

const TENANT = 'tenant-joiners';
/** The lookup takes this long at the provider: past a short inline wait, within a long one. */
const LOOKUP_MS = 600;

let a: AgentsHarness;
const redis = testRedis();
const extra: { delivery: ResultDelivery; connection: ReturnType<typeof testRedis> }[] = [];
beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: { [TENANT]: { check_availability: AVAILABILITY } },
    gatewayId: 'gw-joiners',
  });
  await a.h.sandbox.addRule({
    fault: `latency=${LOOKUP_MS}`,
    tenant: TENANT,
    operation: 'availability',
  });
});
afterAll(async () => {
  for (const { delivery, connection } of extra) {
    await delivery.stop();
    connection.disconnect();
  }
  redis.disconnect();
  await a.close();
});

/** A tool runtime whose reads wait `readDeadlineMs` inline before answering "still checking". */
function runtime(readDeadlineMs: number): ToolRuntime {
  return new ToolRuntime({
    catalogue: a.catalogue,
    tenants: new Map(a.h.config.tenants.map((t) => [t.id, t])),
    actions: a.h.layer,
    audit: a.audit,
    log: quietLog,
    readDeadlineMs,
  });
}

let day = 0;
function lookup(): Record<string, unknown> {
  day++;
  return { restaurant: 'trattoria-roma', date: `2031-06-${String(day).padStart(2, '0')}` };
}

/** Calls onIdle until `port` heard `operationId` to the end (a call does so after each response). */
async function heard(
  delivery: ResultDelivery,
  session: AgentSession,
  port: RecordingPort,
  operationId: string,
): Promise<void> {
  await waitFor(
    async () => {
      await delivery.onIdle(session.sessionId);
      return port.completed(operationId).length > 0 ? true : undefined;
    },
    10_000,
    `the result spoken in ${session.sessionId}`,
  );
}

/** The call's response that spoke the tool output for `callId` played to its end. */
async function heardInline(
  tools: ToolRuntime,
  session: AgentSession,
  callId: string,
): Promise<void> {
  await tools.settleInlineAnswer(session, callId, {
    status: 'completed',
    responseId: `resp_${callId}`,
    firstAudioAt: Date.now(),
  });
}

async function settled(delivery: ResultDelivery): Promise<void> {
  await waitFor(
    async () => ((await redis.xlen(delivery.streamKey(TENANT))) === 0 ? true : undefined),
    5_000,
    'every result entry acknowledged',
  );
}

describe('when a second call joins a shared read and its inline wait times out', () => {
  it('should speak the result to the second call once, and not again to the first that had it inline', async () => {
    const first = a.call(TENANT);
    const second = a.call(TENANT);
    const args = lookup();
    const inline = runtime(5_000);
    const owner = inline.handle(first.session, {
      callId: 'c1',
      name: 'check_availability',
      arguments: args,
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const joined = await runtime(100).handle(second.session, {
      callId: 'c2',
      name: 'check_availability',
      arguments: args,
    });
    expect(joined.status).toBe('timeout');
    expect((await owner).status).toBe('ok');
    await heardInline(inline, first.session, 'c1');
    const [op] = await a.h.layer.ledger.listBySession(TENANT, first.session.sessionId);
    if (!op) throw new Error('no operation');

    await heard(a.delivery, second.session, second.port, op.operationId);
    await a.delivery.onIdle(first.session.sessionId);
    await settled(a.delivery);
    expect(second.port.completed(op.operationId)).toHaveLength(1);
    expect(first.port.spoken).toHaveLength(0);
    const after = await a.h.layer.ledger.require(TENANT, op.operationId);
    expect(after.delivery).toMatchObject({
      decision: 'told_in_tool_output',
      delivered: true,
      responseId: 'resp_c1',
    });
    expect(await a.h.layer.ledger.deliveryFor(after, second.session.sessionId)).toMatchObject({
      decision: 'spoken',
      channel: 'voice',
      delivered: true,
    });
  });

  it('should speak it to the first call when only the second had it inline', async () => {
    const first = a.call(TENANT);
    const second = a.call(TENANT);
    const args = lookup();
    const owner = runtime(100).handle(first.session, {
      callId: 'c1',
      name: 'check_availability',
      arguments: args,
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const inline = runtime(5_000);
    const joined = await inline.handle(second.session, {
      callId: 'c2',
      name: 'check_availability',
      arguments: args,
    });
    expect((await owner).status).toBe('timeout');
    expect(joined.status).toBe('ok');
    await heardInline(inline, second.session, 'c2');
    const [op] = await a.h.layer.ledger.listBySession(TENANT, first.session.sessionId);
    if (!op) throw new Error('no operation');

    await heard(a.delivery, first.session, first.port, op.operationId);
    await a.delivery.onIdle(second.session.sessionId);
    await settled(a.delivery);
    expect(first.port.completed(op.operationId)).toHaveLength(1);
    expect(second.port.spoken).toHaveLength(0);
    const after = await a.h.layer.ledger.require(TENANT, op.operationId);
    expect(after.delivery).toMatchObject({ decision: 'spoken', delivered: true });
    expect(await a.h.layer.ledger.deliveryFor(after, second.session.sessionId)).toMatchObject({
      decision: 'told_in_tool_output',
      delivered: true,
      responseId: 'resp_c2',
    });
  });
});

describe('when the joining call is on another gateway', () => {
  it('should send the result event to that gateway stream, under the joining session', async () => {
    const connection = testRedis();
    const other = new ResultDelivery({
      redis: connection,
      ledger: a.h.layer.ledger,
      gatewayId: 'gw-joiners-2',
      tenants: [TENANT],
      catalogue: a.catalogue,
      outOfBand: a.h.layer.outOfBand,
      audit: a.audit,
      log: quietLog,
    });
    extra.push({ delivery: other, connection });
    await other.start();
    const first = a.call(TENANT);
    const session = new AgentSession({
      sessionId: 'joiner-elsewhere',
      tenantId: TENANT,
      caller: '+15550166',
      ownerGateway: 'gw-joiners-2',
      agent: 'reservations',
    });
    const port = new RecordingPort();
    other.attach(session, port);
    const args = lookup();
    const inline = runtime(5_000);
    const owner = inline.handle(first.session, {
      callId: 'c1',
      name: 'check_availability',
      arguments: args,
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(
      (
        await runtime(100).handle(session, {
          callId: 'c2',
          name: 'check_availability',
          arguments: args,
        })
      ).status,
    ).toBe('timeout');
    expect((await owner).status).toBe('ok');
    await heardInline(inline, first.session, 'c1');
    const [op] = await a.h.layer.ledger.listBySession(TENANT, first.session.sessionId);
    if (!op) throw new Error('no operation');

    await heard(other, session, port, op.operationId);
    await a.delivery.onIdle(first.session.sessionId);
    await settled(other);
    await settled(a.delivery);
    expect(port.completed(op.operationId)).toHaveLength(1);
    expect(first.port.spoken).toHaveLength(0);
  });
});
