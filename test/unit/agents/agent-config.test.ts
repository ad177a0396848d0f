/**
 * The example configuration compiled to agents behaves as the restaurant agents did when they were
 * code: the same tools, descriptions and argument schemas on the wire, the same goals, undo
 * arguments, amounts and idempotency keys.
 */
import { describe, expect, it } from 'vitest';
import type { ToolDefinition } from '../../../agents/agent.ts';
import { AgentSession } from '../../../agents/agent-session.ts';
import { compileAgents } from '../../../agents/agent-config.ts';
import { parseConfig } from '../../../config/load.ts';
import { deriveIdempotencyKey } from '../../../jobs/admission/idempotency.ts';
import { toolToWire } from '../../../gateway/realtime/session-config-wire.ts';
import { exampleAgent, exampleCatalogue } from '../../support/example-agents.ts';

/** What the model was shown for each tool before the agents became configuration. */
const TODAY_PARAMETERS: Record<string, unknown> = {
  operation_status: {
    type: 'object',
    properties: {
      operation_id: {
        type: 'string',
        minLength: 1,
        maxLength: 64,
      },
    },
    required: ['operation_id'],
  },
  cancel_operation: {
    type: 'object',
    properties: {
      operation_id: {
        type: 'string',
        minLength: 1,
        maxLength: 64,
      },
    },
    required: ['operation_id'],
  },
  transfer_to_human: {
    type: 'object',
    properties: {
      reason: {
        type: 'string',
        maxLength: 200,
      },
    },
  },
  check_availability: {
    type: 'object',
    properties: {
      restaurant: {
        type: 'string',
        enum: ['trattoria-roma', 'sushi-kaito', 'bistro-nord'],
      },
      date: {
        type: 'string',
        pattern: '^\\d{4}-\\d{2}-\\d{2}$',
      },
      time: {
        type: 'string',
        pattern: '^([01]\\d|2[0-3]):[0-5]\\d$',
      },
      party_size: {
        type: 'integer',
        minimum: 1,
        maximum: 20,
      },
    },
    required: ['restaurant', 'date'],
  },
  book_table: {
    type: 'object',
    properties: {
      restaurant: {
        type: 'string',
        enum: ['trattoria-roma', 'sushi-kaito', 'bistro-nord'],
      },
      date: {
        type: 'string',
        pattern: '^\\d{4}-\\d{2}-\\d{2}$',
      },
      time: {
        type: 'string',
        pattern: '^([01]\\d|2[0-3]):[0-5]\\d$',
      },
      party_size: {
        type: 'integer',
        minimum: 1,
        maximum: 20,
      },
      name: {
        type: 'string',
        minLength: 1,
        maxLength: 80,
      },
    },
    required: ['restaurant', 'date', 'time', 'party_size', 'name'],
  },
  cancel_booking: {
    type: 'object',
    properties: {
      booking_id: {
        type: 'string',
        minLength: 1,
        maxLength: 64,
      },
    },
    required: ['booking_id'],
  },
  lookup_order: {
    type: 'object',
    properties: {
      order_id: {
        type: 'string',
        pattern: '^ord_\\d{4}$',
      },
    },
    required: ['order_id'],
  },
  refund: {
    type: 'object',
    properties: {
      order_id: {
        type: 'string',
        pattern: '^ord_\\d{4}$',
      },
      amount_cents: {
        type: 'integer',
        minimum: 1,
        maximum: 1000000,
      },
      reason: {
        type: 'string',
        maxLength: 200,
      },
      confirmed: {
        type: 'boolean',
      },
    },
    required: ['order_id', 'amount_cents'],
  },
};

const TODAY_DESCRIPTIONS: Record<string, string> = {
  operation_status:
    'Tell the state of an operation started earlier in this call (booking, refund, ...). Never guess a state.',
  cancel_operation:
    'Cancel an operation started in this call. The answer says whether it was cancelled, only requested, cannot be cancelled while running, or already happened (then offer to undo it).',
  transfer_to_human:
    'Transfer the caller to a person at the front desk. Operations in progress continue; their results follow by message.',
  check_availability:
    'Free tables at a restaurant on a date (and time). Reading only: nothing is booked.',
  book_table:
    'Book a table. Answers at once with an operation id; the confirmation follows. Asking again for the same booking does not book twice. To change a booking, book the new time: the earlier one is cancelled for you.',
  cancel_booking: 'Cancel a confirmed booking by its booking id.',
  lookup_order: 'Look an order up by its id (ord_NNNN): total and what was refunded.',
  refund:
    'Refund part of an order, in cents. Above the confirmation threshold the caller must say yes first: then call again with confirmed=true. Answers at once; the result follows.',
};

const call = new AgentSession({
  sessionId: 'sess-1',
  tenantId: 'demo',
  caller: '+15550111',
  called: '1000',
  ownerGateway: 'gw-1',
  agent: 'concierge',
}).call;

function toolOf(agent: string, name: string): ToolDefinition {
  const tool = exampleAgent(agent).tools.find((t) => t.name === name);
  if (tool === undefined) throw new Error(`${agent} has no tool ${name}`);
  return tool;
}

describe('when the example configuration is compiled', () => {
  it('should give the three agents the tools, reveals and handoffs they had', () => {
    const catalogue = exampleCatalogue();
    expect(catalogue.names()).toEqual(['concierge', 'reservations', 'billing']);
    const shape = (name: string) => {
      const agent = exampleAgent(name);
      return {
        tools: agent.tools.map((t) => t.name),
        reveals: agent.reveals,
        handoffs: agent.handoffs,
      };
    };
    const common = ['operation_status', 'cancel_operation', 'transfer_to_human', 'handoff'];
    expect(shape('concierge')).toEqual({
      tools: common,
      reveals: ['book_table', 'cancel_booking'],
      handoffs: ['reservations', 'billing'],
    });
    expect(shape('reservations')).toEqual({
      tools: ['check_availability', 'book_table', 'cancel_booking', ...common],
      reveals: ['check_availability', 'book_table', 'cancel_booking'],
      handoffs: ['concierge', 'billing'],
    });
    expect(shape('billing')).toEqual({
      tools: ['lookup_order', 'refund', ...common],
      reveals: ['lookup_order', 'refund'],
      handoffs: ['concierge', 'reservations'],
    });
    expect(exampleAgent('reservations').instructions).toMatch(/^You take table bookings\./);
  });

  it('should show the model every tool but handoff as it did, description and parameters alike', () => {
    const seen = new Set<string>();
    for (const agent of ['concierge', 'reservations', 'billing'])
      for (const tool of exampleAgent(agent).tools) {
        if (tool.control === 'handoff') continue;
        seen.add(tool.name);
        const wire = toolToWire({ ...tool, parameters: tool.parameters });
        expect(wire.description, tool.name).toBe(TODAY_DESCRIPTIONS[tool.name]);
        expect(wire.parameters, tool.name).toEqual(TODAY_PARAMETERS[tool.name]);
      }
    expect([...seen].sort()).toEqual(Object.keys(TODAY_PARAMETERS).sort());
  });

  it("should offer each agent's handoff with only its own targets, each described", () => {
    const handoff = toolOf('billing', 'handoff');
    expect(toolToWire(handoff).parameters).toEqual({
      type: 'object',
      properties: {
        agent: {
          type: 'string',
          enum: ['concierge', 'reservations'],
          description: 'The agent to hand the call to.',
        },
      },
      required: ['agent'],
    });
    expect(handoff.description).toBe(
      'Hand the call to another agent of this line. Agents: concierge (greets the caller and routes anything else), reservations (table bookings, availability and changes).',
    );
    // The runtime answers a name outside the list itself (already that agent, or rejected with the list).
    expect(handoff.parameters.safeParse({ agent: 'billing' }).success).toBe(true);
  });

  it('should make the goals it made', () => {
    const book = toolOf('reservations', 'book_table');
    const args = {
      restaurant: 'trattoria-roma',
      date: '2026-12-24',
      time: '19:30',
      party_size: 4,
      name: 'Alex Morgan',
    };
    expect(book.goal?.(book.parameters.parse(args), call)).toBe(
      'booking:trattoria-roma:2026-12-24',
    );
    const refund = toolOf('billing', 'refund');
    expect(refund.goal?.({ order_id: 'ord_1001', amount_cents: 4250 }, call)).toBe(
      'refund:ord_1001',
    );
  });

  it('should undo a booking with its booking id, keeping the value as the result had it', () => {
    const book = toolOf('reservations', 'book_table');
    expect(book.compensation?.action).toBe('cancel_booking');
    const source = { args: {}, call };
    expect(book.compensation?.args({ booking_id: 'bk_42', table: 7 }, source)).toEqual({
      booking_id: 'bk_42',
    });
    expect(book.compensation?.args({ booking_id: 42 }, source)).toEqual({ booking_id: 42 });
  });

  it('should count a refund in currency units, as cents / 100 did', () => {
    const refund = toolOf('billing', 'refund');
    for (const cents of [1, 35, 4250, 10_000, 1_000_000])
      expect(refund.amount?.({ order_id: 'ord_1001', amount_cents: cents })).toBe(cents / 100);
  });

  it('should key a refund repeated with a reworded reason and confirmed added as the same intent', () => {
    const refund = toolOf('billing', 'refund');
    const scope = { tenantId: 'demo', action: 'refund', sessionId: 'sess-1' };
    const first = refund.parameters.parse({
      order_id: 'ord_1001',
      amount_cents: 4250,
      reason: 'the soup was cold',
    });
    const again = refund.parameters.parse({
      confirmed: true,
      reason: 'Customer says the soup arrived cold; they confirmed.',
      amount_cents: 4250,
      order_id: 'ord_1001',
      // Not an argument of the tool: dropped, as the zod object of the tool in code dropped it.
      urgent: true,
    });
    expect(again).not.toHaveProperty('urgent');
    const key = (args: Record<string, unknown>) =>
      deriveIdempotencyKey(scope, args, refund.intent ?? 'all');
    expect(key(again)).toBe(key(first));
    expect(key(first)).toBe(
      deriveIdempotencyKey(scope, { order_id: 'ord_1001', amount_cents: 4250 }, [
        'order_id',
        'amount_cents',
      ]),
    );
    expect(key({ ...first, amount_cents: 4000 })).not.toBe(key(first));
  });
});

describe('when a tool template names call facts and arguments', () => {
  const config = parseConfig({
    providers: {
      clinic: { type: 'http', baseUrl: 'http://127.0.0.1:9/', honoursIdempotencyKeys: true },
    },
    tenants: [
      {
        id: 'clinic',
        numbers: ['2000'],
        agent: 'desk',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: {
          hold_slot: { kind: 'mutation', provider: 'clinic' },
          release_slot: { kind: 'mutation', provider: 'clinic' },
        },
      },
    ],
    agents: {
      tools: [
        {
          name: 'hold_slot',
          description: 'Hold a slot.',
          action: 'hold_slot',
          parameters: {
            type: 'object',
            properties: { day: { type: 'string' }, seats: { type: 'integer' } },
            required: ['day'],
          },
          goal: 'slot:{day}:{call.caller}:{seats}',
          compensation: {
            action: 'release_slot',
            args: {
              hold: '{result.hold_id}',
              day: '{day}',
              note: 'held for {call.caller} on {day}',
            },
          },
          amount: { field: 'seats', scale: 2 },
        },
      ],
      list: [
        {
          name: 'desk',
          instructions: 'Hold slots.',
          voice: 'cedar',
          model: 'gpt-realtime',
          greeting: 'Clinic, good morning.',
          transferTarget: 'sip:nurse@clinic.example',
          tools: ['hold_slot'],
        },
      ],
    },
  }).agents;

  it('should fill them plainly, a missing value as nothing', () => {
    const [desk] = compileAgents({ agents: config });
    const tool = desk?.tools[0];
    expect(tool?.goal?.({ day: 'mon' }, call)).toBe('slot:mon:+15550111:');
    expect(
      tool?.compensation?.args({ hold_id: 'h1' }, { args: { day: 'mon', seats: 2 }, call }),
    ).toEqual({ hold: 'h1', day: 'mon', note: 'held for +15550111 on mon' });
    expect(tool?.amount?.({ day: 'mon', seats: 3 })).toBe(6);
  });

  it('should carry the agent voice, model, greeting and transfer target', () => {
    const [desk] = compileAgents({ agents: config });
    expect(desk).toMatchObject({
      voice: 'cedar',
      model: 'gpt-realtime',
      greeting: 'Clinic, good morning.',
      transferTarget: 'sip:nurse@clinic.example',
    });
  });
});
