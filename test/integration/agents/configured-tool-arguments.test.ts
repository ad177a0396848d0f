/**
 * A tool declared in the configuration validates the model's arguments with its own JSON Schema:
 * invalid ones get an error the model can correct, and nothing is admitted, no side effect made.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../../agents/agent-session.ts';
import { agentCatalogue } from '../../../agents/agent-config.ts';
import { ToolRuntime } from '../../../agents/tool-runtime.ts';
import { parseConfig } from '../../../config/load.ts';
import { BOOK, booking, quietLog } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';

const TENANT = 'tenant-configured-tool';

/** A booking tool of the tenant's own, stricter than the example's: no argument it does not name. */
const AGENTS = {
  tools: [
    {
      name: 'reserve',
      description: 'Reserve a table.',
      action: 'book_table',
      parameters: {
        type: 'object',
        properties: {
          restaurant: { type: 'string', enum: ['sushi-kaito', 'bistro-nord'] },
          date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' },
          time: { type: 'string', pattern: '^([01]\\d|2[0-3]):[0-5]\\d$' },
          party_size: { type: 'integer', minimum: 1, maximum: 8 },
          name: { type: 'string', minLength: 1 },
        },
        required: ['restaurant', 'date', 'time', 'party_size', 'name'],
        additionalProperties: false,
      },
      intent: ['restaurant', 'date', 'time', 'party_size'],
      goal: 'table:{restaurant}:{date}',
    },
  ],
  list: [{ name: 'host', instructions: 'Reserve tables.', tools: ['reserve'] }],
};

let a: AgentsHarness;
let runtime: ToolRuntime;

beforeAll(async () => {
  a = await startAgentsHarness({ tenants: { [TENANT]: { book_table: BOOK } } });
  const catalogue = agentCatalogue(
    parseConfig({
      providers: { bookings: { type: 'sandbox', service: 'bookings' } },
      tenants: [
        {
          id: TENANT,
          numbers: ['7999'],
          agent: 'host',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
          actions: { book_table: BOOK },
        },
      ],
      agents: AGENTS,
    }),
  );
  runtime = new ToolRuntime({
    catalogue,
    tenants: new Map(a.h.config.tenants.map((t) => [t.id, t])),
    actions: a.h.layer,
    audit: a.audit,
    log: quietLog,
  });
});
afterAll(async () => a.close());

function call(): AgentSession {
  return a.call(TENANT, 'host').session;
}

describe('when the model calls a configured tool with invalid arguments', () => {
  it.each([
    ['a restaurant outside the enum', { restaurant: 'trattoria-roma' }, 'restaurant'],
    ['a date that does not match the pattern', { date: '24 December' }, 'date'],
    ['a party above the maximum', { party_size: 9 }, 'party_size'],
    ['a missing required argument', { name: undefined }, 'name'],
    ['an argument the schema does not name', { vip: true }, 'vip: unknown key'],
  ])(
    'should answer %s with invalid_arguments, admit nothing and book nothing',
    async (_what, change, field) => {
      const session = call();
      const args = { ...booking(), restaurant: 'sushi-kaito', name: 'Ada', ...change };
      const output = await runtime.handle(session, {
        callId: 'c1',
        name: 'reserve',
        arguments: args,
      });
      expect(output).toMatchObject({ status: 'error', error: 'invalid_arguments' });
      expect(output.problems).toEqual(
        expect.arrayContaining([expect.stringMatching(new RegExp(`^${field}`))]),
      );
      expect(await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).toHaveLength(0);
      expect(await a.h.sandbox.effects({ tenant: TENANT, operation: 'book' })).toHaveLength(0);
    },
  );

  it('should start the booking once the model corrects them', async () => {
    const session = call();
    const slot = booking();
    const wrong = await runtime.handle(session, {
      callId: 'c1',
      name: 'reserve',
      arguments: {
        restaurant: 'sushi-kaito',
        date: slot.date,
        time: '7pm',
        party_size: 2,
        name: 'Ada',
      },
    });
    expect(wrong).toMatchObject({ status: 'error', error: 'invalid_arguments' });
    const right = await runtime.handle(session, {
      callId: 'c2',
      name: 'reserve',
      arguments: {
        restaurant: 'sushi-kaito',
        date: slot.date,
        time: '19:00',
        party_size: 2,
        name: 'Ada',
      },
    });
    expect(right).toMatchObject({ status: 'started' });
    const ops = await a.h.layer.ledger.listBySession(TENANT, session.sessionId);
    expect(ops).toHaveLength(1);
    expect(ops[0]?.scope.goal).toBe(`table:sushi-kaito:${String(slot.date)}`);
  });
});
