/**
 * Plugins see the call: a before-tool plugin that lets only verified callers change a booking gets
 * the caller, whether a trusted trunk vouched for it, the number dialled, the tenant and the
 * session; what it allows is admitted with the same facts on the operation, what it refuses is not
 * admitted at all.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentCatalogue } from '../../../agents/agent.ts';
import { AgentSession, type CallFacts } from '../../../agents/agent-session.ts';
import type { BeforeToolPlugin } from '../../../agents/tool-plugins.ts';
import { ToolRuntime, type ToolRuntimeOptions } from '../../../agents/tool-runtime.ts';
import { tenantSchema } from '../../../config/schema.ts';
import type { AdmissionRequest } from '../../../jobs/admission/admission.ts';
import { quietLog } from '../../support/action-harness.ts';

const tenant = tenantSchema.parse({
  id: 'clinic',
  numbers: ['+15550100'],
  agent: 'front-desk',
  trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
  actions: { move_appointment: { kind: 'mutation', provider: 'records', intent: ['day'] } },
});

const catalogue = new AgentCatalogue([
  {
    name: 'front-desk',
    instructions: 'Move appointments.',
    tools: [
      {
        name: 'move_appointment',
        description: 'Move the caller’s appointment to another day.',
        parameters: z.object({ day: z.string() }),
        action: 'move_appointment',
      },
    ],
    reveals: ['move_appointment'],
    handoffs: [],
  },
]);

function runtime(): { runtime: ToolRuntime; seen: CallFacts[]; admitted: AdmissionRequest[] } {
  const seen: CallFacts[] = [];
  const admitted: AdmissionRequest[] = [];
  const verifiedOnly: BeforeToolPlugin = {
    name: 'verified-callers-only',
    check: ({ call }) => {
      seen.push(call);
      return call.callerVerified
        ? { type: 'allow' }
        : { type: 'refuse', reason: 'only a verified caller may move an appointment' };
    },
  };
  const actions = {
    admit: async (request: AdmissionRequest) => {
      admitted.push(request);
      return { type: 'started', operationId: 'op_1', idempotencyKey: 'idk_1', queued: false };
    },
  } as unknown as ToolRuntimeOptions['actions'];
  return {
    runtime: new ToolRuntime({
      catalogue,
      tenants: new Map([[tenant.id, tenant]]),
      actions,
      audit: { record: async () => undefined } as unknown as ToolRuntimeOptions['audit'],
      log: quietLog,
      before: [verifiedOnly],
      after: [],
    }),
    seen,
    admitted,
  };
}

function session(callerVerified: boolean): AgentSession {
  return new AgentSession({
    sessionId: 'ses_1',
    tenantId: 'clinic',
    caller: '+15550123',
    callerVerified,
    called: '+15550100',
    ownerGateway: 'gw-a',
    agent: 'front-desk',
  });
}

const MOVE = { callId: 'call_1', name: 'move_appointment', arguments: { day: 'friday' } };

describe('when a before-tool plugin authorizes by the caller', () => {
  it('should see the call facts and admit a verified caller’s request with them', async () => {
    const { runtime: r, seen, admitted } = runtime();
    expect(await r.handle(session(true), MOVE)).toMatchObject({ status: 'started' });
    expect(seen).toEqual([
      {
        caller: '+15550123',
        callerVerified: true,
        called: '+15550100',
        tenant: 'clinic',
        session: 'ses_1',
      },
    ]);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]?.scope).toMatchObject({
      sessionId: 'ses_1',
      caller: '+15550123',
      callerVerified: true,
      called: '+15550100',
    });
  });

  it('should refuse a caller no trusted trunk vouched for, and admit nothing', async () => {
    const { runtime: r, seen, admitted } = runtime();
    expect(await r.handle(session(false), MOVE)).toEqual({
      status: 'rejected',
      error: 'refused',
      message: 'only a verified caller may move an appointment',
    });
    expect(seen[0]?.callerVerified).toBe(false);
    expect(admitted).toEqual([]);
  });
});
