import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ConfigError, loadConfig, parseConfig } from '../../../config/load.ts';

const BOOK_PARAMETERS = {
  type: 'object',
  properties: {
    date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' },
    party_size: { type: 'integer', minimum: 1 },
  },
  required: ['date', 'party_size'],
};

interface ToolDocument {
  name: string;
  description?: string;
  action?: string;
  control?: string;
  parameters?: unknown;
  intent?: string[];
  goal?: string;
  compensation?: { action: string; args: Record<string, string> };
  amount?: { field: string; scale?: number };
}
interface AgentDocument {
  name: string;
  instructions?: string;
  instructionsFile?: string;
  voice?: string;
  model?: string;
  tools: string[];
  reveals?: string[];
  handoffs?: { agent: string; description?: string }[];
}
interface TenantDocument {
  id: string;
  numbers: string[];
  agent: string;
  model?: string;
  trunk?: Record<string, unknown>;
  actions?: Record<string, unknown>;
}
interface ClinicDocument {
  rtp?: Record<string, unknown>;
  providers: Record<string, unknown>;
  tenants: TenantDocument[];
  agents: { tools: ToolDocument[]; list: AgentDocument[] };
}

function nth<T>(list: readonly T[], i: number): T {
  const item = list[i];
  if (item === undefined) throw new Error(`no entry ${i}`);
  return item;
}
const tool = (d: ClinicDocument, i: number): ToolDocument => nth(d.agents.tools, i);
const agent = (d: ClinicDocument, i: number): AgentDocument => nth(d.agents.list, i);
const tenant = (d: ClinicDocument, i: number): TenantDocument => nth(d.tenants, i);

/** A clinic's line: a front desk that hands off to appointments, which books against its own action. */
function clinic(): ClinicDocument {
  return {
    providers: {
      clinic: { type: 'http', baseUrl: 'http://127.0.0.1:9/', honoursIdempotencyKeys: true },
    },
    tenants: [
      {
        id: 'clinic',
        numbers: ['2000'],
        agent: 'front_desk',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: {
          book_visit: { kind: 'mutation', provider: 'clinic' },
          cancel_visit: { kind: 'mutation', provider: 'clinic' },
        },
      },
    ],
    agents: {
      tools: [
        {
          name: 'book_visit',
          description: 'Book a visit.',
          action: 'book_visit',
          parameters: BOOK_PARAMETERS,
          intent: ['date'],
          goal: 'visit:{date}:{call.caller}',
          compensation: { action: 'cancel_visit', args: { visit_id: '{result.visit_id}' } },
          amount: { field: 'party_size' },
        },
        { name: 'handoff', control: 'handoff' },
        { name: 'transfer_to_human', control: 'transfer_to_human' },
      ],
      list: [
        {
          name: 'front_desk',
          instructions: 'Greet and route.',
          tools: ['handoff', 'transfer_to_human'],
          handoffs: [{ agent: 'appointments', description: 'visits' }],
        },
        {
          name: 'appointments',
          instructions: 'Book visits.',
          tools: ['book_visit', 'handoff'],
          reveals: ['book_visit'],
          handoffs: [{ agent: 'front_desk' }],
        },
      ],
    },
  };
}

function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  return [];
}

describe('when a configuration declares agents and tools', () => {
  it('should accept a consistent one', () => {
    const config = parseConfig(clinic());
    expect(config.agents?.list.map((agent) => agent.name)).toEqual(['front_desk', 'appointments']);
  });

  it('should list every cross-check problem of one load together, each by its path', () => {
    const document = clinic();
    const book = tool(document, 0);
    const handoff = tool(document, 1);
    // An invalid JSON Schema, on another tool.
    document.agents.tools.push({
      name: 'lookup_visit',
      description: 'Find a visit.',
      action: 'lookup_visit',
      parameters: { type: 'object', properties: { id: { type: 'string', patternProperties: {} } } },
    });
    agent(document, 1).tools.push('lookup_visit');
    // Templates naming fields the tool does not have.
    book.goal = 'visit:{clinic_day}';
    book.intent = ['date', 'doctor'];
    // And an undo action the tenant does not have.
    book.compensation = {
      action: 'void_visit',
      args: { visit_id: '{result.visit_id}', by: '{call.doctor}' },
    };
    // A handoff to an agent that does not exist, an unknown tool.
    agent(document, 0).handoffs?.push({ agent: 'billing' });
    agent(document, 0).tools.push('refund');
    expect(handoff.name).toBe('handoff');
    // And a problem elsewhere in the configuration, in the same load.
    document.rtp = { portMin: 20001 };
    expect(problemsOf(() => parseConfig(document))).toEqual([
      'agents.tools[0].intent[1]: doctor is not an argument of the tool (its arguments: date, party_size)',
      'agents.tools[0].goal: {clinic_day} names no argument or call fact (known: {date} {party_size} {call.caller} {call.called} {call.tenant} {call.session})',
      'agents.tools[0].compensation.args.by: {call.doctor} names no argument or call fact (known: {date} {party_size} {call.caller} {call.called} {call.tenant} {call.session} {result.<field>})',
      'agents.tools[3].parameters.properties.id.patternProperties: patternProperties is not supported by function calling: name every argument in properties',
      'agents.list[0].tools[2]: unknown tool refund (agents.tools has: book_visit, handoff, transfer_to_human, lookup_visit)',
      'agents.list[0].handoffs[1].agent: unknown agent billing (agents.list has: front_desk, appointments)',
      'tenants[0].actions: has no action void_visit, which tool book_visit of agent appointments runs (a call of this tenant can reach that agent)',
      'tenants[0].actions: has no action lookup_visit, which tool lookup_visit of agent appointments runs (a call of this tenant can reach that agent)',
      'rtp.portMin: must be even (RTP uses even ports, RTCP the odd one above)',
    ]);
  });

  it('should refuse a tenant whose entry agent does not exist', () => {
    const document = clinic();
    tenant(document, 0).agent = 'reception';
    expect(problemsOf(() => parseConfig(document))).toEqual([
      'tenants[0].agent: unknown agent reception (agents.list has: front_desk, appointments)',
    ]);
  });

  it('should check actions only for tenants whose calls can reach the tool', () => {
    const document = clinic();
    // A second tenant whose front desk can reach nobody: it needs neither booking action.
    document.agents.list.push({
      name: 'kiosk',
      instructions: 'Only transfers.',
      tools: ['transfer_to_human'],
    });
    document.tenants.push({
      id: 'lobby',
      numbers: ['2001'],
      agent: 'kiosk',
      trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
    });
    expect(problemsOf(() => parseConfig(document))).toEqual([]);
    tenant(document, 1).agent = 'front_desk';
    expect(problemsOf(() => parseConfig(document))).toEqual([
      expect.stringMatching(
        /^tenants\[1\]\.actions: has no action book_visit, which tool book_visit of agent appointments/,
      ),
      expect.stringMatching(
        /^tenants\[1\]\.actions: has no action cancel_visit, which tool book_visit of agent appointments/,
      ),
    ]);
  });

  it('should refuse agents of one call with different voices or models, and say why', () => {
    const document = clinic();
    agent(document, 1).voice = 'cedar';
    tenant(document, 0).model = 'gpt-realtime-mini';
    agent(document, 1).model = 'gpt-realtime';
    expect(problemsOf(() => parseConfig(document))).toEqual([
      'agents.list[1].model: model gpt-realtime differs from gpt-realtime-mini of front_desk, the entry agent of tenant clinic, whose calls can be handed to appointments: a realtime session cannot change its model mid-call',
      'agents.list[1].voice: voice cedar differs from marin of front_desk, the entry agent of tenant clinic, whose calls can be handed to appointments: a realtime session cannot change its voice mid-call',
    ]);
  });

  it('should refuse a tool that is neither an action nor a control, and templates on control tools', () => {
    const document = clinic();
    document.agents.tools.push(
      { name: 'chat', description: 'Talk.' },
      { name: 'status', control: 'operation_status', goal: 'x' },
      { name: 'hand', control: 'handoff', parameters: BOOK_PARAMETERS },
    );
    expect(problemsOf(() => parseConfig(document))).toEqual([
      'agents.tools[3].action: a tool runs either an action or a control (operation_status, ...), one of them',
      'agents.tools[4].goal: only a tool running an action declares it',
      "agents.tools[5].parameters: are made per agent from its handoffs (the agent's names)",
    ]);
  });

  it('should refuse an amount that is not a number argument, and reveals no tool runs', () => {
    const document = clinic();
    tool(document, 0).amount = { field: 'date' };
    agent(document, 1).reveals?.push('refund');
    expect(problemsOf(() => parseConfig(document))).toEqual([
      'agents.tools[0].amount.field: date is not a number argument',
      'agents.list[1].reveals[1]: no tool runs an action refund (tools run: book_visit, cancel_visit)',
    ]);
  });
});

describe('when an agent reads its instructions from a file', () => {
  function write(document: unknown, files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-agents-'));
    mkdirSync(join(dir, 'agents'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const path = join(dir, 'callgate.yaml');
    writeFileSync(path, stringify(document));
    return path;
  }

  it('should read it relative to the configuration file', () => {
    const document = clinic();
    delete agent(document, 0).instructions;
    agent(document, 0).instructionsFile = 'agents/front-desk.md';
    const path = write(document, { 'agents/front-desk.md': 'You answer for the clinic.\n' });
    const config = loadConfig({ path, env: {} });
    expect(config.agents?.list[0]?.instructions).toBe('You answer for the clinic.');
  });

  it('should list a missing file with the other problems, and refuse both forms at once', () => {
    const document = clinic();
    delete agent(document, 0).instructions;
    agent(document, 0).instructionsFile = 'agents/missing.md';
    agent(document, 1).instructionsFile = 'agents/appointments.md';
    tenant(document, 0).agent = 'reception';
    const path = write(document, { 'agents/appointments.md': 'Book visits.' });
    expect(problemsOf(() => loadConfig({ path, env: {} }))).toEqual([
      'agents.list[1].instructions: set instructions or instructionsFile, one of them',
      'tenants[0].agent: unknown agent reception (agents.list has: front_desk, appointments)',
      expect.stringMatching(
        /^agents\.list\[0\]\.instructionsFile: cannot read .*agents\/missing\.md: ENOENT$/,
      ),
    ]);
  });
});
