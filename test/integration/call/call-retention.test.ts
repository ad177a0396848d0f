import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../../agents/audit.ts';
import { Logger } from '../../../config/log.ts';
import { callEvents } from '../../../gateway/call/call-events.ts';
import { CallRegistry } from '../../../gateway/call/call-registry.ts';
import { registerCallsApi } from '../../../gateway/call/calls-api.ts';
import { newOperation, testLedger } from '../../support/operations.ts';
import { startTestOperatorServer, type TestOperatorServer } from '../../support/operator-api.ts';

const quiet = new Logger({ level: 'error', sink: { write: () => undefined } });
const TTL_SECONDS = 1;
/** Redis expires a key within a millisecond of its TTL when it is read; this leaves room for the clock. */
const PAST_TTL_MS = TTL_SECONDS * 1000 + 300;

const { redis, ledger, prefix } = testLedger('retention');
const registry = new CallRegistry({
  redis,
  prefix,
  gatewayId: 'gw-retention',
  heartbeatMs: 200,
  deadAfterMs: 5_000,
  log: quiet,
  retention: { callRecordsTtlSeconds: TTL_SECONDS, timelineTtlSeconds: TTL_SECONDS },
});
const audit = new AuditLog(redis, prefix, quiet, TTL_SECONDS);
let http: TestOperatorServer | undefined;
let base = '';

beforeAll(async () => {
  registry.start();
  // Open (no tokens), as `npm start` on loopback: what is checked here is retention, not auth.
  http = await startTestOperatorServer(
    (server) => registerCallsApi(server, { registry, audit, ledger }),
    { tokens: 'open' },
  );
  base = http.base;
});

afterAll(async () => {
  registry.stop();
  await http?.close();
});

async function placeCall(sessionId: string): Promise<string> {
  await registry.open({
    sessionId,
    tenantId: 'demo',
    sipCallId: `sip-${sessionId}`,
    caller: '+34671234512',
    calledNumber: '+34910000000',
    agent: 'host',
    startedAt: Date.now(),
  });
  await registry.appendEvent(
    sessionId,
    callEvents.agentSaid('resp_1', 'A table for four at nine.'),
  );
  await audit.record(sessionId, {
    type: 'tool_requested',
    tool: 'book_table',
    callId: 'call_1',
    args: { party: 4, name: 'Ana' },
  });
  const op = newOperation({ scope: { ...newOperation().scope, sessionId } });
  expect((await ledger.admit(op)).type).toBe('admitted');
  return op.operationId;
}

async function getJson(path: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}${path}`);
  return { status: response.status, body: await response.json() };
}

describe('when a call has ended and its retention has passed', () => {
  it('should set the configured TTL on the record, its events and its audit trail', async () => {
    await placeCall('call-ttl');
    await registry.close('call-ttl', 'caller_hung_up');
    for (const key of [
      `${prefix}:call:call-ttl`,
      `${prefix}:call:call-ttl:events`,
      audit.key('call-ttl'),
    ]) {
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(TTL_SECONDS * 1000);
    }
  });

  it('should no longer serve the call or its timeline, while its operation is kept', async () => {
    const operationId = await placeCall('call-gone');
    await registry.close('call-gone', 'caller_hung_up');
    const before = await getJson('/v1/calls/call-gone/timeline');
    expect(before.status).toBe(200);
    expect(JSON.stringify(before.body)).toContain('A table for four at nine.');

    await sleep(PAST_TTL_MS);

    expect(
      await redis.exists(
        `${prefix}:call:call-gone`,
        `${prefix}:call:call-gone:events`,
        audit.key('call-gone'),
      ),
    ).toBe(0);
    expect((await getJson('/v1/calls/call-gone/timeline')).status).toBe(404);
    const list = (await getJson('/v1/calls')).body as { recent: { session_id: string }[] };
    expect(list.recent.map((call) => call.session_id)).not.toContain('call-gone');
    expect((await ledger.get('demo', operationId))?.operationId).toBe(operationId);
    expect((await ledger.listBySession('demo', 'call-gone')).map((op) => op.operationId)).toEqual([
      operationId,
    ]);
  });

  it('should keep a live call whatever its retention, and count the retention from its end', async () => {
    await placeCall('call-long');
    await sleep(PAST_TTL_MS);
    expect((await registry.get('call-long'))?.state).toBe('active');

    await registry.close('call-long', 'caller_hung_up');
    expect((await registry.get('call-long'))?.state).toBe('ended');
    await sleep(PAST_TTL_MS);
    expect(await registry.get('call-long')).toBeUndefined();
  });
});
