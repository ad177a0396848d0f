/**
 * A module's exports (agents/public-api.ts) read as the configuration would hold them: each agent
 * and tool through the configuration's own schemas, with the code the data cannot hold kept
 * beside it (goal, compensation arguments, amount; zod parameters). Pure: every problem is an
 * issue with its path in the module (`agents[1].tools[0].name`), none thrown
 * (test/unit/agents/agent-module.test.ts).
 */
import { z, type ZodObject } from 'zod';
import type { JsonSchema } from '../config/agents-json-schema.ts';
import {
  agentSchema,
  agentToolSchema,
  type AgentConfig,
  type AgentToolConfig,
  type AgentsConfig,
  type AgentsIssue,
} from '../config/agents-schema.ts';
import { formatIssues, formatPath } from '../config/load.ts';
import type { Plugin } from './public-api.ts';
import { DEFAULT_AFTER, DEFAULT_BEFORE } from './tool-plugins.ts';

type Path = (string | number)[];

/** A tool of the module: the data the configuration would hold, and the code it cannot. */
export interface ModuleTool {
  readonly view: AgentToolConfig;
  readonly spec: Readonly<Record<string, unknown>>;
  /** zod parameters as given; the runtime validates with them. */
  readonly zod?: ZodObject;
  /** Where it is first listed: `agents[0].tools[2]`. */
  readonly at: Path;
}

export interface ModuleAgent {
  readonly view: AgentConfig;
  readonly at: Path;
}

export interface ReadExports {
  readonly agents: ModuleAgent[];
  readonly tools: ModuleTool[];
  readonly plugins: Plugin[];
  readonly issues: AgentsIssue[];
}

const TOOL_KEYS = new Set([
  'name',
  'description',
  'parameters',
  'action',
  'control',
  'intent',
  'goal',
  'compensation',
  'amount',
]);

const aFunction = z.custom<(...args: never[]) => unknown>(
  (value) => typeof value === 'function',
  'must be a function',
);

const pluginSchema = z
  .strictObject({
    name: z
      .string()
      .regex(
        /^[a-z][a-z0-9_-]{0,62}$/,
        'must start with a letter and use only a-z, 0-9, _ and - (at most 63 characters)',
      ),
    before: aFunction.optional(),
    after: aFunction.optional(),
  })
  .refine((plugin) => plugin.before !== undefined || plugin.after !== undefined, {
    message: 'a plugin needs a before or an after function',
  });

/** callgate's own plugins keep their names in logs and metrics. */
const BUILT_IN_PLUGINS = new Set([...DEFAULT_BEFORE, ...DEFAULT_AFTER].map((p) => p.name));

/** The agents, tools and plugins a module exports; names are checked against the configured ones. */
export function readExports(exports: unknown, section: AgentsConfig): ReadExports {
  const read: ReadExports = { agents: [], tools: [], plugins: [], issues: [] };
  const named = isRecord(exports) ? exports : {};
  const source =
    'agents' in named || 'plugins' in named
      ? named
      : isRecord(named.default)
        ? named.default
        : undefined;
  if (source === undefined || (source.agents === undefined && source.plugins === undefined)) {
    read.issues.push({
      path: [],
      message:
        'exports no agents and no plugins (export `agents` and `plugins`, or a default { agents, plugins })',
    });
    return read;
  }
  readAgents(source.agents, read);
  readPlugins(source.plugins, read);
  read.issues.push(...nameIssues(read, section));
  return read;
}

function readAgents(list: unknown, read: ReadExports): void {
  if (list === undefined) return;
  if (!Array.isArray(list)) {
    read.issues.push({ path: ['agents'], message: 'must be a list of agents (defineAgent)' });
    return;
  }
  const tools = new Map<object, ModuleTool | undefined>();
  list.forEach((entry: unknown, i) => {
    const at: Path = ['agents', i];
    if (!isRecord(entry)) {
      read.issues.push({ path: at, message: 'must be an agent (defineAgent({ name, ... }))' });
      return;
    }
    if (entry.instructionsFile !== undefined)
      read.issues.push({
        path: [...at, 'instructionsFile'],
        message: 'is for the configuration; a module reads its own files into instructions',
      });
    const listed = entry.tools === undefined ? [] : entry.tools;
    if (!Array.isArray(listed)) {
      read.issues.push({ path: [...at, 'tools'], message: 'must be a list of tools (tool)' });
      return;
    }
    const names = listed.map((value: unknown, k) => {
      if (!isRecord(value)) {
        read.issues.push({
          path: [...at, 'tools', k],
          message: 'must be a tool (tool({ name, ... }))',
        });
        return undefined;
      }
      if (!tools.has(value)) {
        const tool = readTool(value, [...at, 'tools', k], read.issues);
        tools.set(value, tool);
        if (tool !== undefined) read.tools.push(tool);
      }
      return tools.get(value)?.view.name;
    });
    // The schema would offer instructionsFile, which is the configuration's.
    if (entry.instructions === undefined)
      read.issues.push({ path: [...at, 'instructions'], message: 'must be set' });
    const { instructionsFile: _refused, ...spec } = entry;
    const view = agentSchema.safeParse({
      ...spec,
      instructions: entry.instructions ?? '(unset)',
      tools: names.filter((name) => name !== undefined),
    });
    if (view.success) read.agents.push({ view: view.data, at });
    else read.issues.push(...zodIssues(view.error, at));
  });
}

function readTool(
  spec: Record<string, unknown>,
  at: Path,
  issues: AgentsIssue[],
): ModuleTool | undefined {
  const before = issues.length;
  for (const key of Object.keys(spec))
    if (!TOOL_KEYS.has(key)) issues.push({ path: [...at, key], message: 'unknown key' });
  for (const key of ['goal', 'amount'] as const) {
    if (spec[key] === undefined) continue;
    if (typeof spec[key] !== 'function')
      issues.push({
        path: [...at, key],
        message: "must be a function (templates are the configuration's)",
      });
    else if (spec.control !== undefined)
      issues.push({ path: [...at, key], message: 'only a tool running an action declares it' });
  }
  const compensation = spec.compensation;
  if (isRecord(compensation) && compensation.args !== undefined)
    if (typeof compensation.args !== 'function')
      issues.push({
        path: [...at, 'compensation', 'args'],
        message: 'must be a function of the result (and the undone arguments and call)',
      });
  const parameters = parametersOf(spec.parameters);
  if (parameters.problem !== undefined)
    issues.push({ path: [...at, 'parameters'], message: parameters.problem });
  const view = agentToolSchema.safeParse(
    withoutUndefined({
      name: spec.name,
      description: spec.description,
      // Parameters already refused are not also missing.
      parameters: parameters.problem === undefined ? parameters.jsonSchema : {},
      action: spec.action,
      control: spec.control,
      intent: spec.intent,
      compensation: isRecord(compensation) ? { action: compensation.action } : compensation,
    }),
  );
  if (!view.success) issues.push(...zodIssues(view.error, at));
  if (!view.success || issues.length > before) return undefined;
  return {
    view: view.data,
    spec,
    ...(parameters.zod !== undefined && { zod: parameters.zod }),
    at,
  };
}

/** A zod object (converted for the model), or a JSON Schema as the configuration has it. */
function parametersOf(parameters: unknown): {
  jsonSchema?: JsonSchema;
  zod?: ZodObject;
  problem?: string;
} {
  if (parameters === undefined) return {};
  if (isZodSchema(parameters)) {
    if (!(parameters instanceof z.ZodObject) && parameters._zod.def.type !== 'object')
      return { problem: 'must be a zod object (z.object({ ... })) or a JSON Schema' };
    try {
      const converted = z.toJSONSchema(parameters as ZodObject, { io: 'input' });
      const { $schema: _dialect, ...jsonSchema } = converted;
      return { jsonSchema, zod: parameters as ZodObject };
    } catch (error) {
      return { problem: `cannot be shown to the model as a JSON Schema: ${firstLine(error)}` };
    }
  }
  if (isRecord(parameters)) return { jsonSchema: parameters };
  return { problem: 'must be a zod object (z.object({ ... })) or a JSON Schema' };
}

function readPlugins(list: unknown, read: ReadExports): void {
  if (list === undefined) return;
  if (!Array.isArray(list)) {
    read.issues.push({ path: ['plugins'], message: 'must be a list of plugins (plugin)' });
    return;
  }
  const seen = new Map<string, number>();
  list.forEach((entry: unknown, i) => {
    const at: Path = ['plugins', i];
    const parsed = pluginSchema.safeParse(entry);
    if (!parsed.success) {
      read.issues.push(...zodIssues(parsed.error, at));
      return;
    }
    const { name } = parsed.data;
    const earlier = seen.get(name);
    if (BUILT_IN_PLUGINS.has(name))
      read.issues.push({ path: [...at, 'name'], message: `${name} is a plugin of callgate's own` });
    else if (earlier !== undefined)
      read.issues.push({
        path: [...at, 'name'],
        message: `duplicate plugin ${name} (also [${earlier}])`,
      });
    else {
      seen.set(name, i);
      read.plugins.push(entry as Plugin);
    }
  });
}

/** An agent or tool name is defined once, in the configuration or the module. */
function nameIssues(read: ReadExports, section: AgentsConfig): AgentsIssue[] {
  const issues: AgentsIssue[] = [];
  const check = (
    entries: readonly { view: { name: string }; at: Path }[],
    configured: readonly { name: string }[],
    what: 'agent' | 'tool',
    where: string,
  ): void => {
    const first = new Map<string, string>(
      configured.map((entry, i) => [entry.name, `${where}[${i}] of the configuration`]),
    );
    for (const { view, at } of entries) {
      const earlier = first.get(view.name);
      if (earlier !== undefined)
        issues.push({
          path: [...at, 'name'],
          message: `${what} ${view.name} is defined twice (also ${earlier})`,
        });
      else first.set(view.name, formatPath(at));
    }
  };
  check(read.agents, section.list, 'agent', 'agents.list');
  check(read.tools, section.tools, 'tool', 'agents.tools');
  return issues;
}

function zodIssues(error: z.ZodError, at: Path): AgentsIssue[] {
  return formatIssues(
    error.issues.map((issue) => ({ ...issue, path: [...at, ...issue.path] })),
  ).map((message) => ({ path: [], message }));
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isZodSchema(value: unknown): value is { _zod: { def: { type: string } } } {
  return isRecord(value) && isRecord(value._zod) && typeof value.safeParse === 'function';
}

function withoutUndefined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0] ?? text;
}
