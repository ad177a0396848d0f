/**
 * The `agents` section: tools (shared by name) and the agents that use them, as data. The shape
 * is checked here; what ties it to the rest of the configuration (tenants' entry agents and
 * actions, one model and voice per call, templates against the tool's arguments) is checked by
 * `agentsIssues`, which the configuration's own refinement runs, so every problem is listed in one
 * load (test/unit/config/agents-validation.test.ts).
 */
import { z } from 'zod';
import {
  isNumberField,
  schemaFields,
  toolSchemaIssues,
  type JsonSchema,
} from './agents-json-schema.ts';
import type { Config, TenantConfig } from './schema.ts';

/** The same rule as schema.ts's ids: agent and action names become parts of Redis keys. */
const safeName = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,62}$/,
    'must start with a letter and use only a-z, 0-9, _ and - (at most 63 characters)',
  );

/** The same rule as schema.ts's field names: a tool argument. */
const argumentName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
    'must be a plain argument name (letters, digits, _; at most 64 characters)',
  );

/** What function calling accepts as a function name. */
const toolName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must use only letters, digits, _ and - (at most 64)');

const template = z.string().min(1).max(500);

export const CONTROL_TOOLS = [
  'operation_status',
  'cancel_operation',
  'transfer_to_human',
  'handoff',
] as const;
export type ControlTool = (typeof CONTROL_TOOLS)[number];

/** The call facts a template may name as `{call.<name>}`. */
export const CALL_FIELDS = ['caller', 'called', 'tenant', 'session'] as const;

/** Arguments each control tool reads: parameters given for it must still declare them. */
const CONTROL_ARGUMENTS: Readonly<Record<ControlTool, readonly string[]>> = {
  operation_status: ['operation_id'],
  cancel_operation: ['operation_id'],
  transfer_to_human: [],
  handoff: ['agent'],
};

export const agentToolSchema = z
  .strictObject({
    name: toolName,
    /** What the model reads to choose the tool; a control tool has a built-in one. */
    description: z.string().min(1).max(1024).optional(),
    /** JSON Schema of the arguments (type object), as function calling takes it. */
    parameters: z.record(z.string(), z.unknown()).optional(),
    /** The tenant action the tool runs (a key of each tenant's `actions`). */
    action: safeName.optional(),
    /** Or a tool the runtime itself runs. */
    control: z.enum(CONTROL_TOOLS).optional(),
    /** The arguments that make two requests the same intent (the idempotency key's fields). */
    intent: z.array(argumentName).min(1).max(32).optional(),
    /** A newer request for the same goal supersedes an older one: `booking:{restaurant}:{date}`. */
    goal: template.optional(),
    /** How a committed result is undone: the action, and its arguments from `{result.<field>}`. */
    compensation: z
      .strictObject({
        action: safeName,
        args: z.record(argumentName, template).default({}),
      })
      .optional(),
    /** The argument limits and confirmation thresholds read, times `scale` (cents: 0.01). */
    amount: z
      .strictObject({ field: argumentName, scale: z.number().positive().default(1) })
      .optional(),
  })
  .superRefine((tool, ctx) => {
    const add = (path: string, message: string): void =>
      ctx.addIssue({ code: 'custom', path: [path], message });
    if ((tool.action === undefined) === (tool.control === undefined))
      add(
        'action',
        'a tool runs either an action or a control (operation_status, ...), one of them',
      );
    if (tool.action !== undefined) {
      if (tool.description === undefined) add('description', 'a tool running an action needs one');
      if (tool.parameters === undefined) add('parameters', 'a tool running an action needs them');
    }
    if (tool.control !== undefined) {
      for (const key of ['intent', 'goal', 'compensation', 'amount'] as const)
        if (tool[key] !== undefined) add(key, 'only a tool running an action declares it');
      if (tool.control === 'handoff' && tool.parameters !== undefined)
        add('parameters', "are made per agent from its handoffs (the agent's names)");
    }
  });

const handoffSchema = z.strictObject({
  agent: safeName,
  /** What the model reads about this agent when choosing whom to hand the call to. */
  description: z.string().min(1).max(500).optional(),
});

export const agentSchema = z
  .strictObject({
    name: safeName,
    instructions: z.string().min(1).optional(),
    /** A file holding the instructions, relative to the configuration file. */
    instructionsFile: z.string().min(1).optional(),
    /** Defaults to model.openai.voice. */
    voice: z.string().min(1).optional(),
    /** Defaults to the tenant's model, then model.openai.model. */
    model: z.string().min(1).optional(),
    /** Spoken first when the call is answered; unset, the model opens the conversation. */
    greeting: z.string().min(1).max(1000).optional(),
    /** Tools by name (of `agents.tools`). */
    tools: z.array(toolName).default([]),
    /** Actions whose results this agent may tell the caller. */
    reveals: z.array(safeName).default([]),
    handoffs: z.array(handoffSchema).default([]),
    /** Overrides the tenant's transferTarget while this agent has the call. */
    transferTarget: z
      .string()
      .regex(/^(sips?|tel):/, 'must be a sip:, sips: or tel: URI')
      .optional(),
  })
  .superRefine((agent, ctx) => {
    if ((agent.instructions === undefined) === (agent.instructionsFile === undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['instructions'],
        message: 'set instructions or instructionsFile, one of them',
      });
  });

export const agentsSchema = z.strictObject({
  tools: z.array(agentToolSchema).default([]),
  list: z.array(agentSchema).default([]),
  /**
   * A TypeScript or JavaScript module exporting more agents and plugins (agents/public-api.ts),
   * relative to the configuration file; load.ts makes it absolute. Imported when a gateway starts
   * (agents/agent-module.ts), so agents it defines are checked there, with these.
   */
  module: z
    .string()
    .regex(/\.(ts|mts|js|mjs)$/, 'must name a .ts, .mts, .js or .mjs file')
    .optional(),
});

export type AgentsConfig = z.infer<typeof agentsSchema>;
export type AgentToolConfig = z.infer<typeof agentToolSchema>;
export type AgentConfig = z.infer<typeof agentSchema>;

type Path = (string | number)[];
export interface AgentsIssue {
  readonly path: Path;
  readonly message: string;
}

/** The `{name}` placeholders of a template, in order (`{result.booking_id}`, `{call.caller}`, `{date}`). */
export function templatePlaceholders(text: string): string[] {
  return [...text.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\}/g)].map(
    (match) => match[1] ?? '',
  );
}

/**
 * Everything that ties the agents to each other and to the tenants, with paths from the root.
 * While `agents.module` is unread, an agent name or revealed action found nowhere may be the
 * module's: those checks wait for the module, which runs them all again with its agents added
 * (agents/agent-module.ts; test/unit/agents/agent-module.test.ts).
 */
export function agentsIssues(config: Pick<Config, 'agents' | 'tenants' | 'model'>): AgentsIssue[] {
  const agents = config.agents;
  if (agents === undefined) return [];
  const moduleUnread = agents.module !== undefined;
  const tools = new Map(agents.tools.map((tool) => [tool.name, tool]));
  const byName = new Map(agents.list.map((agent) => [agent.name, agent]));
  return [
    ...duplicates(
      agents.tools.map((t) => t.name),
      ['agents', 'tools'],
      'tool',
    ),
    ...duplicates(
      agents.list.map((a) => a.name),
      ['agents', 'list'],
      'agent',
    ),
    ...agents.tools.flatMap((tool, i) => toolIssues(tool, ['agents', 'tools', i])),
    ...agents.list.flatMap((agent, i) =>
      agentIssues(agent, ['agents', 'list', i], tools, byName, agents.tools, moduleUnread),
    ),
    ...config.tenants.flatMap((tenant, t) =>
      tenantIssues(tenant, ['tenants', t], config, tools, byName, moduleUnread),
    ),
  ];
}

function duplicates(names: readonly string[], at: Path, what: string): AgentsIssue[] {
  const first = new Map<string, number>();
  const issues: AgentsIssue[] = [];
  names.forEach((name, i) => {
    const earlier = first.get(name);
    if (earlier === undefined) first.set(name, i);
    else
      issues.push({
        path: [...at, i, 'name'],
        message: `duplicate ${what} ${name} (also [${earlier}])`,
      });
  });
  return issues;
}

function toolIssues(tool: AgentToolConfig, at: Path): AgentsIssue[] {
  // A handoff tool's parameters are made per agent (refused in its own shape check).
  if (tool.parameters === undefined || tool.control === 'handoff') return [];
  const schemaProblems = toolSchemaIssues(tool.parameters).map((problem) => ({
    path: [...at, 'parameters', ...problem.path],
    message: problem.message,
  }));
  if (schemaProblems.length > 0) return schemaProblems;
  const fields = schemaFields(tool.parameters);
  const issues: AgentsIssue[] = [];
  const known = (name: string): boolean => name in fields;
  const callField = (name: string): boolean =>
    name.startsWith('call.') && (CALL_FIELDS as readonly string[]).includes(name.slice(5));
  if (tool.control !== undefined) {
    for (const needed of CONTROL_ARGUMENTS[tool.control])
      if (!known(needed))
        issues.push({
          path: [...at, 'parameters', 'properties'],
          message: `must declare ${needed}: the ${tool.control} tool reads it`,
        });
  }
  tool.intent?.forEach((field, f) => {
    if (!known(field))
      issues.push({ path: [...at, 'intent', f], message: unknownField(field, fields) });
  });
  if (tool.goal !== undefined)
    for (const name of templatePlaceholders(tool.goal))
      if (!known(name) && !callField(name))
        issues.push({ path: [...at, 'goal'], message: unknownPlaceholder(name, fields) });
  for (const [arg, text] of Object.entries(tool.compensation?.args ?? {}))
    for (const name of templatePlaceholders(text))
      if (!known(name) && !callField(name) && !/^result\.[A-Za-z_]\w*$/.test(name))
        issues.push({
          path: [...at, 'compensation', 'args', arg],
          message: unknownPlaceholder(name, fields, ['{result.<field>}']),
        });
  if (tool.amount !== undefined) {
    const field = fields[tool.amount.field];
    if (field === undefined)
      issues.push({
        path: [...at, 'amount', 'field'],
        message: unknownField(tool.amount.field, fields),
      });
    else if (!isNumberField(field))
      issues.push({
        path: [...at, 'amount', 'field'],
        message: `${tool.amount.field} is not a number argument`,
      });
  }
  return issues;
}

function unknownField(name: string, fields: Readonly<Record<string, JsonSchema>>): string {
  return `${name} is not an argument of the tool (its arguments: ${Object.keys(fields).join(', ') || 'none'})`;
}

function unknownPlaceholder(
  name: string,
  fields: Readonly<Record<string, JsonSchema>>,
  more: readonly string[] = [],
): string {
  const known = [
    ...Object.keys(fields).map((f) => `{${f}}`),
    ...CALL_FIELDS.map((f) => `{call.${f}}`),
    ...more,
  ];
  return `{${name}} names no argument or call fact (known: ${known.join(' ')})`;
}

function agentIssues(
  agent: AgentConfig,
  at: Path,
  tools: ReadonlyMap<string, AgentToolConfig>,
  agents: ReadonlyMap<string, AgentConfig>,
  allTools: readonly AgentToolConfig[],
  moduleUnread: boolean,
): AgentsIssue[] {
  const issues: AgentsIssue[] = [];
  const seen = new Set<string>();
  agent.tools.forEach((name, i) => {
    if (seen.has(name))
      issues.push({ path: [...at, 'tools', i], message: `${name} is named twice` });
    seen.add(name);
    const tool = tools.get(name);
    if (tool === undefined)
      issues.push({
        path: [...at, 'tools', i],
        message: `unknown tool ${name} (agents.tools has: ${[...tools.keys()].join(', ') || 'none'})`,
      });
    else if (tool.control === 'handoff' && agent.handoffs.length === 0)
      issues.push({
        path: [...at, 'tools', i],
        message: `${name} hands off, but the agent has no handoffs to offer`,
      });
  });
  agent.handoffs.forEach((handoff, h) => {
    if (!agents.has(handoff.agent)) {
      if (!moduleUnread)
        issues.push({
          path: [...at, 'handoffs', h, 'agent'],
          message: `unknown agent ${handoff.agent} (agents.list has: ${[...agents.keys()].join(', ')})`,
        });
    } else if (handoff.agent === agent.name)
      issues.push({
        path: [...at, 'handoffs', h, 'agent'],
        message: 'an agent cannot hand off to itself',
      });
  });
  const actions = new Set(
    allTools
      .flatMap((tool) => [tool.action, tool.compensation?.action])
      .filter((a) => a !== undefined),
  );
  agent.reveals.forEach((action, r) => {
    if (!actions.has(action) && !moduleUnread)
      issues.push({
        path: [...at, 'reveals', r],
        message: `no tool runs an action ${action} (tools run: ${[...actions].join(', ') || 'none'})`,
      });
  });
  return issues;
}

/** The agents one call of a tenant can reach: its entry agent and every handoff from there on. */
export function reachableAgents(
  entry: string,
  agents: ReadonlyMap<string, Pick<AgentConfig, 'handoffs'>>,
): string[] {
  const reached = [entry];
  for (let i = 0; i < reached.length; i++) {
    for (const handoff of agents.get(reached[i] as string)?.handoffs ?? [])
      if (agents.has(handoff.agent) && !reached.includes(handoff.agent))
        reached.push(handoff.agent);
  }
  return reached;
}

function tenantIssues(
  tenant: TenantConfig,
  at: Path,
  config: Pick<Config, 'model'>,
  tools: ReadonlyMap<string, AgentToolConfig>,
  agents: ReadonlyMap<string, AgentConfig>,
  moduleUnread: boolean,
): AgentsIssue[] {
  // A media-test line never reaches an agent.
  if (tenant.mediaTest !== undefined) return [];
  if (!agents.has(tenant.agent))
    return moduleUnread
      ? []
      : [
          {
            path: [...at, 'agent'],
            message: `unknown agent ${tenant.agent} (agents.list has: ${[...agents.keys()].join(', ') || 'none'})`,
          },
        ];
  const reached = reachableAgents(tenant.agent, agents);
  return [
    ...actionIssues(tenant, at, reached, tools, agents),
    ...sessionIssues(tenant, reached, config, agents),
  ];
}

/** Every action a reachable agent's tools run (or undo with) is one of the tenant's. */
function actionIssues(
  tenant: TenantConfig,
  at: Path,
  reached: readonly string[],
  tools: ReadonlyMap<string, AgentToolConfig>,
  agents: ReadonlyMap<string, AgentConfig>,
): AgentsIssue[] {
  const missing = new Map<string, string>();
  const runners = new Map<string, AgentToolConfig[]>();
  for (const name of reached) {
    for (const toolName of agents.get(name)?.tools ?? []) {
      const tool = tools.get(toolName);
      if (tool?.action === undefined) continue;
      runners.set(tool.action, [...(runners.get(tool.action) ?? []), tool]);
      for (const action of [tool.action, tool.compensation?.action])
        if (action !== undefined && !(action in tenant.actions) && !missing.has(action))
          missing.set(action, `tool ${tool.name} of agent ${name}`);
    }
  }
  const issues: AgentsIssue[] = [...missing].map(([action, user]) => ({
    path: [...at, 'actions'],
    message: `has no action ${action}, which ${user} runs (a call of this tenant can reach that agent)`,
  }));
  // The tenant's intent fields must be arguments of every tool running the action (tool-runtime.ts checks it too).
  for (const [action, config] of Object.entries(tenant.actions)) {
    if (!Array.isArray(config.intent)) continue;
    for (const tool of runners.get(action) ?? []) {
      const fields = tool.parameters === undefined ? {} : schemaFields(tool.parameters);
      config.intent.forEach((field, f) => {
        if (!(field in fields))
          issues.push({
            path: [...at, 'actions', action, 'intent', f],
            message: `${field} is not an argument of tool ${tool.name}, which runs ${action}`,
          });
      });
    }
  }
  return issues;
}

/** A realtime session keeps its model and voice: agents of one call must share them. */
function sessionIssues(
  tenant: TenantConfig,
  reached: readonly string[],
  config: Pick<Config, 'model'>,
  agents: ReadonlyMap<string, AgentConfig>,
): AgentsIssue[] {
  const entry = agents.get(tenant.agent);
  if (entry === undefined) return [];
  const modelOf = (agent: AgentConfig): string =>
    agent.model ?? tenant.model ?? config.model.openai.model;
  const voiceOf = (agent: AgentConfig): string => agent.voice ?? config.model.openai.voice;
  const issues: AgentsIssue[] = [];
  for (const name of reached.slice(1)) {
    const agent = agents.get(name);
    if (agent === undefined) continue;
    const index = [...agents.keys()].indexOf(name);
    for (const [what, of] of [
      ['model', modelOf],
      ['voice', voiceOf],
    ] as const) {
      if (of(agent) !== of(entry))
        issues.push({
          path: ['agents', 'list', index, what],
          message: `${what} ${of(agent)} differs from ${of(entry)} of ${entry.name}, the entry agent of tenant ${tenant.id}, whose calls can be handed to ${name}: a realtime session cannot change its ${what} mid-call`,
        });
    }
  }
  return issues;
}
