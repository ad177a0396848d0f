/**
 * Plugins of an agent module run around every tool after callgate's own, and fail closed: a
 * before-tool plugin that throws (or answers no verdict) refuses the tool and nothing is admitted;
 * an after-tool plugin that throws hides the output's details, never the operation it started.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadCallAgents, readAgentModule, type CallAgents } from '../../../agents/agent-module.ts';
import type { AgentSession } from '../../../agents/agent-session.ts';
import { defineAgent, plugin, tool, type Plugin } from '../../../agents/public-api.ts';
import { ToolRuntime } from '../../../agents/tool-runtime.ts';
import { loadConfig, parseConfig } from '../../../config/load.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';

const TENANT = 'tenant-module-plugins';
const MODULE = '/srv/clinic-agents.ts';

const reserve = tool({
  name: 'reserve',
  description: 'Reserve a table.',
  parameters: z.object({
    restaurant: z.string(),
    date: z.iso.date(),
    time: z.string(),
    party_size: z.int().min(1).max(20),
    name: z.string(),
  }),
  action: 'book_table',
  intent: ['restaurant', 'date', 'time', 'party_size'],
  goal: (args) => `table:${args.restaurant}:${args.date}`,
});

let a: AgentsHarness;

beforeAll(async () => {
  a = await startAgentsHarness({ tenants: { [TENANT]: { book_table: BOOK } } });
});
afterAll(async () => a.close());

/** A runtime whose agents and plugins come from a module exporting `plugins`. */
function runtimeWith(plugins: readonly Plugin[], tools = [reserve]): ToolRuntime {
  const config = parseConfig({
    providers: { bookings: { type: 'sandbox', service: 'bookings' } },
    tenants: [
      {
        id: TENANT,
        numbers: ['7300'],
        agent: 'host',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: { book_table: BOOK },
      },
    ],
    agents: { module: MODULE },
  });
  const agents = readAgentModule(
    MODULE,
    {
      agents: [defineAgent({ name: 'host', instructions: 'Reserve tables.', tools })],
      plugins,
    },
    config,
  );
  return runtimeOf(agents);
}

function runtimeOf({ catalogue, before, after }: CallAgents): ToolRuntime {
  return new ToolRuntime({
    catalogue,
    tenants: new Map(a.h.config.tenants.map((t) => [t.id, t])),
    actions: a.h.layer,
    audit: a.audit,
    log: quietLog,
    before,
    after,
  });
}

async function reserveTable(runtime: ToolRuntime, session: AgentSession, slot = booking()) {
  return runtime.handle(session, { callId: 'c1', name: 'reserve', arguments: slot });
}

async function admitted(session: AgentSession) {
  return a.h.layer.ledger.listBySession(TENANT, session.sessionId);
}

describe('when a before-tool plugin of the module throws', () => {
  it('should refuse the tool, admit nothing and book nothing', async () => {
    const runtime = runtimeWith([
      plugin({
        name: 'office-hours',
        before: () => {
          throw new Error('the opening-hours service is down');
        },
      }),
    ]);
    const session = a.call(TENANT, 'host').session;
    const output = await reserveTable(runtime, session);
    expect(output).toEqual({
      status: 'rejected',
      error: 'refused',
      message: 'the office-hours check failed',
    });
    expect(await admitted(session)).toHaveLength(0);
    // The first booking attempt of this tenant: the sandbox holds none of its bookings.
    expect(await a.h.sandbox.effects({ tenant: TENANT, operation: 'book' })).toHaveLength(0);
    const refused = (await a.audit.read(session.sessionId))
      .map((record) => record.event)
      .filter((event) => event.type === 'tool_refused');
    expect(refused).toMatchObject([{ tool: 'reserve', by: 'office-hours' }]);
  });
});

describe('when a before-tool plugin of the module answers no verdict', () => {
  it('should refuse the tool and admit nothing', async () => {
    const runtime = runtimeWith([
      { name: 'sloppy', before: () => ({ type: 'maybe' }) } as unknown as Plugin,
    ]);
    const session = a.call(TENANT, 'host').session;
    const output = await reserveTable(runtime, session);
    expect(output).toMatchObject({ status: 'rejected', message: 'the sloppy check failed' });
    expect(await admitted(session)).toHaveLength(0);
  });
});

describe('when before-tool plugins of the module decide', () => {
  it('should see the call facts and arguments, and admit what they allow', async () => {
    const seen: unknown[] = [];
    const runtime = runtimeWith([
      plugin({
        name: 'known-callers',
        before: (context) => {
          seen.push(context);
          return context.call.caller === undefined
            ? { type: 'refuse', reason: 'we need your number' }
            : { type: 'allow' };
        },
      }),
    ]);
    const session = a.call(TENANT, 'host').session;
    const slot = booking();
    const output = await reserveTable(runtime, session, slot);
    expect(output).toMatchObject({ status: 'started' });
    expect(seen).toMatchObject([
      {
        call: { caller: '+15550100', tenant: TENANT, session: session.sessionId },
        tenant: { id: TENANT },
        agent: 'host',
        tool: { name: 'reserve', action: 'book_table' },
        args: { date: slot.date },
        action: { name: 'book_table', kind: 'mutation', money: false },
      },
    ]);
    expect(await admitted(session)).toHaveLength(1);
  });

  it('should send the model back to ask when one needs a confirmation, admitting nothing', async () => {
    const runtime = runtimeWith([
      plugin({
        name: 'large-groups',
        before: ({ args }) =>
          Number(args.party_size) > 8 && args.confirmed !== true
            ? { type: 'needs_confirmation', prompt: 'Confirm the group of more than 8 first.' }
            : { type: 'allow' },
      }),
    ]);
    const session = a.call(TENANT, 'host').session;
    const output = await reserveTable(runtime, session, booking({ party_size: 12 }));
    expect(output).toEqual({
      status: 'needs_confirmation',
      message: 'Confirm the group of more than 8 first.',
    });
    expect(await admitted(session)).toHaveLength(0);
  });
});

describe('when an after-tool plugin of the module throws', () => {
  it('should hide the details but keep the status and the operation it started', async () => {
    const runtime = runtimeWith([
      plugin({
        name: 'rewording',
        after: () => {
          throw new Error('no wording for this');
        },
      }),
    ]);
    const session = a.call(TENANT, 'host').session;
    const output = await reserveTable(runtime, session);
    const [operation] = await admitted(session);
    expect(Object.keys(output).sort()).toEqual(['error', 'message', 'operation_id', 'status']);
    expect(output).toMatchObject({
      status: 'started',
      operation_id: operation?.operationId,
      error: 'output_withheld',
    });
    expect(output.message).toMatch(/cannot be shown; its status \(started\) stands/);
  });
});

describe('when a goal function of the module throws', () => {
  it('should fail the tool call before admission: nothing admitted', async () => {
    const runtime = runtimeWith(
      [],
      [
        tool({
          name: 'reserve',
          description: 'Reserve a table.',
          parameters: reserve.parameters ?? {},
          action: 'book_table',
          goal: () => {
            throw new Error('no calendar for this restaurant');
          },
        }),
      ],
    );
    const session = a.call(TENANT, 'host').session;
    await expect(reserveTable(runtime, session)).rejects.toThrow('no calendar for this restaurant');
    expect(await admitted(session)).toHaveLength(0);
  });
});

describe('when the example module refuses a private room on its closed day', () => {
  let runtime: ToolRuntime;
  beforeAll(async () => {
    const path = fileURLToPath(
      new URL('../../../examples/restaurant-module/callgate.yaml', import.meta.url),
    );
    runtime = runtimeOf(await loadCallAgents(loadConfig({ path, env: {} })));
  });

  it('should refuse a Monday and book a Tuesday', async () => {
    const session = a.call(TENANT, 'private-dining').session;
    const room = (date: string) =>
      runtime.handle(session, {
        callId: `c-${date}`,
        name: 'book_private_room',
        arguments: { ...booking({ party_size: 10 }), date },
      });
    expect(await room('2033-01-03')).toMatchObject({
      status: 'rejected',
      message: 'The private rooms are closed on Mondays; offer another evening.',
    });
    expect(await admitted(session)).toHaveLength(0);
    expect(await room('2033-01-04')).toMatchObject({ status: 'started' });
    const ops = await admitted(session);
    expect(ops).toHaveLength(1);
    expect(ops[0]?.scope.goal).toBe('private-dining:+15550100:2033-01-04');
  });
});
