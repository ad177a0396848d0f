import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../../agents/audit.ts';
import { Logger } from '../../../config/log.ts';
import { callEvents } from '../../../gateway/call/call-events.ts';
import { CallRegistry } from '../../../gateway/call/call-registry.ts';
import { registerCallsApi } from '../../../gateway/call/calls-api.ts';
import { newOperation, testLedger } from '../../support/operations.ts';
import { startTestOperatorServer, type TestOperatorServer } from '../../support/operator-api.ts';

const quiet = new Logger({ level: 'error', sink: { write: () => undefined } });
const CALLER = '+34671234512';

const { redis, ledger, prefix } = testLedger('masking');
const registry = new CallRegistry({
  redis,
  prefix,
  gatewayId: 'gw-masking',
  heartbeatMs: 1_000,
  deadAfterMs: 5_000,
  log: quiet,
});
const audit = new AuditLog(redis, prefix, quiet);
const servers: TestOperatorServer[] = [];
const bases = { masked: '', plain: '' };

beforeAll(async () => {
  // Open (no tokens): what is checked here is what the API shows, not who may ask.
  for (const maskCallerNumbers of [true, false]) {
    const server = await startTestOperatorServer(
      (operator) => registerCallsApi(operator, { registry, audit, ledger, maskCallerNumbers }),
      { tokens: 'open' },
    );
    servers.push(server);
    bases[maskCallerNumbers ? 'masked' : 'plain'] = server.base;
  }
  await registry.open({
    sessionId: 'call-masked',
    tenantId: 'demo',
    sipCallId: 'sip-masked',
    caller: CALLER,
    calledNumber: '+34910000000',
    agent: 'host',
    startedAt: Date.now(),
  });
  await registry.appendEvent('call-masked', callEvents.agentSaid('resp_1', 'Booked for nine.'));
  await audit.record('call-masked', {
    type: 'tool_requested',
    tool: 'book_table',
    callId: 'call_1',
    args: { party: 4 },
  });
  await ledger.admit(
    newOperation({ scope: { ...newOperation().scope, sessionId: 'call-masked', caller: CALLER } }),
  );
  await registry.close('call-masked', 'caller_hung_up');
});

afterAll(async () => {
  for (const server of servers) await server.close();
});

async function text(base: string, path: string): Promise<string> {
  const response = await fetch(`${base}${path}`);
  expect(response.status).toBe(200);
  return response.text();
}

describe('when privacy.maskCallerNumbers is on', () => {
  it('should show the caller masked in the timeline, the calls list and the call page', async () => {
    const timeline = JSON.parse(await text(bases.masked, '/v1/calls/call-masked/timeline')) as {
      call: { caller: string; called_number: string };
      timeline: { type: string }[];
    };
    expect(timeline.call.caller).toBe('+3467****12');
    expect(timeline.call.called_number).toBe('+34910000000');
    expect(timeline.timeline.map((entry) => entry.type)).toEqual(
      expect.arrayContaining(['agent_said', 'tool_requested', 'operation_admitted']),
    );
    for (const path of ['/v1/calls/call-masked/timeline', '/v1/calls', '/calls/call-masked']) {
      const body = await text(bases.masked, path);
      expect(body, path).not.toContain(CALLER);
      expect(body, path).toContain('+3467****12');
    }
  });

  it('should keep the real number in what is stored: the call record and the operation', async () => {
    expect((await registry.get('call-masked'))?.caller).toBe(CALLER);
    const [op] = await ledger.listBySession('demo', 'call-masked');
    expect(op?.scope.caller).toBe(CALLER);
  });
});

describe('when privacy.maskCallerNumbers is off', () => {
  it('should show the caller as it called', async () => {
    expect(await text(bases.plain, '/v1/calls/call-masked/timeline')).toContain(
      `"caller":"${CALLER}"`,
    );
  });
});
