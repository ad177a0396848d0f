/**
 * A module named by `agents.module`: its agents join the configured ones, checked with them; a
 * module that is missing, throws on import or exports something invalid is a configuration error
 * naming the module and the path of each problem, all listed at once.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readAgentModule, loadCallAgents } from '../../../agents/agent-module.ts';
import { defineAgent, plugin, tool } from '../../../agents/public-api.ts';
import { ConfigError, loadConfig, parseConfig } from '../../../config/load.ts';

const EXAMPLE = fileURLToPath(
  new URL('../../../examples/restaurant-module/callgate.yaml', import.meta.url),
);

const BOOK = { kind: 'mutation', provider: 'bookings', operation: 'book' };
const CANCEL = { kind: 'mutation', provider: 'bookings' };

/** A configuration whose tenant is answered by `agent`, with `agents` as its section. */
function configWith(agents: Record<string, unknown>, agent = 'clinic') {
  return parseConfig({
    providers: { bookings: { type: 'sandbox', service: 'bookings' } },
    tenants: [
      {
        id: 'clinic',
        numbers: ['7100'],
        agent,
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: { book_table: BOOK, cancel_booking: CANCEL },
      },
    ],
    agents: { module: '/srv/clinic-agents.ts', ...agents },
  });
}

const bookVisit = tool({
  name: 'book_visit',
  description: 'Book a visit.',
  parameters: z.object({
    restaurant: z.string(),
    date: z.iso.date(),
    time: z.string(),
    party_size: z.int(),
    name: z.string(),
  }),
  action: 'book_table',
  intent: ['restaurant', 'date', 'time', 'party_size'],
  goal: (args, call) => `visit:${call.caller ?? call.session}:${args.date}`,
  compensation: { action: 'cancel_booking', args: (result) => ({ booking_id: result.booking_id }) },
});

const clinic = defineAgent({ name: 'clinic', instructions: 'Book visits.', tools: [bookVisit] });

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error('expected a configuration error');
}

async function asyncProblemsOf(run: () => Promise<unknown>): Promise<string[]> {
  try {
    await run();
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error('expected a configuration error');
}

function moduleFile(name: string, text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'callgate-module-')), name);
  writeFileSync(path, text);
  return path;
}

describe('when the configuration names a module', () => {
  it('should accept a tenant whose entry agent only the module defines, until the module is read', () => {
    const config = configWith({});
    expect(config.agents?.module).toBe('/srv/clinic-agents.ts');
    const problems = problemsOf(() => readAgentModule('/srv/clinic-agents.ts', {}, config));
    expect(problems).toEqual([
      'agents.module (/srv/clinic-agents.ts): exports no agents and no plugins (export `agents` and `plugins`, or a default { agents, plugins })',
    ]);
  });

  it('should resolve the module against the configuration file', () => {
    const config = loadConfig({ path: EXAMPLE, env: {} });
    expect(config.agents?.module).toBe(
      fileURLToPath(new URL('../../../examples/restaurant-module/agents.ts', import.meta.url)),
    );
  });

  it('should refuse a file that is not a module by its name', () => {
    expect(() => parseConfig({ agents: { module: './agents.json' } })).toThrow(
      /agents\.module: must name a \.ts, \.mts, \.js or \.mjs file/,
    );
  });
});

describe('when the module is sound', () => {
  it('should compile its agents with the configured ones and keep its code', () => {
    const config = configWith({
      list: [
        {
          name: 'front-desk',
          instructions: 'Route calls.',
          tools: ['handoff'],
          handoffs: [{ agent: 'clinic', description: 'visits' }],
        },
      ],
      tools: [{ name: 'handoff', control: 'handoff' }],
    });
    const { catalogue, before } = readAgentModule(
      '/srv/clinic-agents.ts',
      {
        agents: [clinic],
        plugins: [plugin({ name: 'office-hours', before: () => ({ type: 'allow' }) })],
      },
      config,
    );
    expect(catalogue.names()).toEqual(['front-desk', 'clinic']);
    // The configured agent's handoff lists the module's agent with its description.
    expect(catalogue.get('front-desk')?.tools[0]?.description).toMatch(
      /Agents: clinic \(visits\)\./,
    );
    const visit = catalogue.get('clinic')?.tools[0];
    expect(visit?.jsonSchema).toMatchObject({
      type: 'object',
      required: ['restaurant', 'date', 'time', 'party_size', 'name'],
    });
    expect(visit?.jsonSchema).not.toHaveProperty('$schema');
    expect(
      visit?.goal?.(
        { date: '2031-05-02' },
        { tenant: 'clinic', session: 's1', callerVerified: false },
      ),
    ).toBe('visit:s1:2031-05-02');
    expect(
      visit?.compensation?.args(
        { booking_id: 'bk_1' },
        { args: {}, call: { tenant: 'clinic', session: 's1', callerVerified: false } },
      ),
    ).toEqual({ booking_id: 'bk_1' });
    expect(visit?.parameters.safeParse({ date: 'soon' }).success).toBe(false);
    expect(before.map((p) => p.name)).toEqual([
      'authorization',
      'confirmation',
      'limits',
      'office-hours',
    ]);
  });

  it('should read a default export of agents and plugins', () => {
    const { catalogue } = readAgentModule(
      '/srv/clinic-agents.ts',
      { default: { agents: [clinic] } },
      configWith({}),
    );
    expect(catalogue.get('clinic')?.tools.map((t) => t.name)).toEqual(['book_visit']);
  });

  it('should load and compile the example module, importing from callgate', async () => {
    const config = loadConfig({ path: EXAMPLE, env: {} });
    const { catalogue, before } = await loadCallAgents(config);
    const agent = catalogue.get('private-dining');
    expect(agent?.tools.map((t) => t.name)).toEqual([
      'book_private_room',
      'cancel_booking',
      'operation_status',
      'transfer_to_human',
    ]);
    expect(agent?.greeting).toMatch(/^Private dining/);
    const room = agent?.tools[0];
    expect(
      room?.goal?.(
        { date: '2031-05-02' },
        { tenant: 'private-dining', session: 's1', callerVerified: false },
      ),
    ).toBe('private-dining:s1:2031-05-02');
    expect(
      room?.goal?.(
        { date: '2031-05-02' },
        { caller: '+15550100', callerVerified: false, tenant: 'private-dining', session: 's1' },
      ),
    ).toBe('private-dining:+15550100:2031-05-02');
    expect(before.map((p) => p.name)).toContain('private-rooms-closed-day');
  });
});

describe('when the module cannot be imported', () => {
  it('should name the module when there is no such file', async () => {
    const path = join(tmpdir(), 'callgate-no-such-module.ts');
    const problems = await asyncProblemsOf(() => loadCallAgents(configWith({ module: path })));
    expect(problems).toEqual([`agents.module (${path}): no such file`]);
  });

  it('should name the module and say what it threw on import', async () => {
    const path = moduleFile(
      'throws.ts',
      "throw new Error('CLINIC_API_URL is not set');\nexport const agents = [];\n",
    );
    const problems = await asyncProblemsOf(() => loadCallAgents(configWith({ module: path })));
    expect(problems).toEqual([
      `agents.module (${path}): importing it failed: CLINIC_API_URL is not set`,
    ]);
  });

  it('should name the module when it does not compile', async () => {
    const path = moduleFile('broken.ts', 'export const agents = [;\n');
    const problems = await asyncProblemsOf(() => loadCallAgents(configWith({ module: path })));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(`^agents\\.module \\(${path}\\): importing it failed: `),
    );
  });

  it('should list the problems of an imported module that exports an invalid agent', async () => {
    const path = moduleFile(
      'invalid.mjs',
      "export const agents = [{ name: 'Clinic', instructions: 'Book visits.', tools: [] }];\n",
    );
    const problems = await asyncProblemsOf(() => loadCallAgents(configWith({ module: path })));
    expect(problems).toEqual([
      `agents.module (${path}): agents[0].name: must start with a letter and use only a-z, 0-9, _ and - (at most 63 characters)`,
    ]);
  });
});

describe('when the module exports something invalid', () => {
  const at = (problem: string) => `agents.module (/srv/clinic-agents.ts): ${problem}`;

  it('should list every problem of its agents, tools and plugins by path, at once', () => {
    const problems = problemsOf(() =>
      readAgentModule(
        '/srv/clinic-agents.ts',
        {
          agents: [
            clinic,
            {
              name: 'billing',
              instructions: 'Refunds.',
              tools: [
                { name: 'refund money', description: 'Refund.', action: 'refund', parameters: {} },
                { name: 'status', control: 'operation_status', goal: () => 'x' },
                'operation_status',
              ],
              handoff: [],
            },
            42,
            { name: 'nurse', instructionsFile: 'nurse.md' },
          ],
          plugins: [
            { name: 'audit' },
            plugin({ name: 'limits', before: () => ({ type: 'allow' }) }),
            { name: 'audit', after: 'redact' },
          ],
        },
        configWith({}),
      ),
    );
    expect(problems).toEqual([
      at('agents[1].tools[0].name: must use only letters, digits, _ and - (at most 64)'),
      at('agents[1].tools[1].goal: only a tool running an action declares it'),
      at('agents[1].tools[2]: must be a tool (tool({ name, ... }))'),
      at('agents[1].handoff: unknown key'),
      at('agents[2]: must be an agent (defineAgent({ name, ... }))'),
      at(
        'agents[3].instructionsFile: is for the configuration; a module reads its own files into instructions',
      ),
      at('agents[3].instructions: must be set'),
      at('plugins[0]: a plugin needs a before or an after function'),
      at("plugins[1].name: limits is a plugin of callgate's own"),
      at('plugins[2].after: must be a function'),
    ]);
  });

  it('should refuse zod parameters that JSON Schema cannot show', () => {
    const problems = problemsOf(() =>
      readAgentModule(
        '/srv/clinic-agents.ts',
        {
          agents: [
            defineAgent({
              name: 'clinic',
              instructions: 'Book visits.',
              tools: [
                tool({
                  name: 'book_visit',
                  description: 'Book a visit.',
                  parameters: z.object({ date: z.string(), when: z.date() }),
                  action: 'book_table',
                }),
              ],
            }),
          ],
        },
        configWith({}),
      ),
    );
    expect(problems).toEqual([
      expect.stringMatching(
        /^agents\.module \(\/srv\/clinic-agents\.ts\): agents\[0\]\.tools\[0\]\.parameters: cannot be shown to the model as a JSON Schema: /,
      ),
    ]);
  });

  it('should refuse an agent the configuration defines too', () => {
    const problems = problemsOf(() =>
      readAgentModule(
        '/srv/clinic-agents.ts',
        { agents: [clinic, defineAgent({ name: 'front-desk', instructions: 'Route calls.' })] },
        configWith({ list: [{ name: 'front-desk', instructions: 'Route calls.' }] }),
      ),
    );
    expect(problems).toEqual([
      at(
        'agents[1].name: agent front-desk is defined twice (also agents.list[0] of the configuration)',
      ),
    ]);
  });

  it('should check module agents with the cross-checks of the configuration', () => {
    const problems = problemsOf(() =>
      readAgentModule(
        '/srv/clinic-agents.ts',
        {
          agents: [
            defineAgent({
              name: 'clinic',
              instructions: 'Book visits.',
              voice: 'cedar',
              tools: [
                tool({
                  name: 'refund',
                  description: 'Refund.',
                  parameters: z.object({ order_id: z.string() }),
                  action: 'refund',
                  intent: ['order_id', 'amount' as never],
                }),
              ],
              reveals: ['lookup_order'],
              handoffs: [{ agent: 'billing' }, { agent: 'front-desk' }],
            }),
          ],
        },
        configWith(
          {
            list: [
              {
                name: 'front-desk',
                instructions: 'Route calls.',
                handoffs: [{ agent: 'clinic' }, { agent: 'nurse' }],
              },
            ],
          },
          'front-desk',
        ),
      ),
    );
    expect(problems).toEqual([
      at(
        'agents[0].tools[0].intent[1]: amount is not an argument of the tool (its arguments: order_id)',
      ),
      'agents.list[0].handoffs[1].agent: unknown agent nurse (agents.list has: front-desk, clinic)',
      at(
        'agents[0].handoffs[0].agent: unknown agent billing (agents.list has: front-desk, clinic)',
      ),
      at('agents[0].reveals[0]: no tool runs an action lookup_order (tools run: refund)'),
      'tenants[0].actions: has no action refund, which tool refund of agent clinic runs (a call of this tenant can reach that agent)',
      at(
        'agents[0].voice: voice cedar differs from marin of front-desk, the entry agent of tenant clinic, whose calls can be handed to clinic: a realtime session cannot change its voice mid-call',
      ),
    ]);
  });

  it('should name a tenant whose entry agent neither defines', () => {
    const problems = problemsOf(() =>
      readAgentModule('/srv/clinic-agents.ts', { agents: [clinic] }, configWith({}, 'nurse')),
    );
    expect(problems).toEqual(['tenants[0].agent: unknown agent nurse (agents.list has: clinic)']);
  });
});
