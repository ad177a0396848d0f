/**
 * Agents and plugins from the module `agents.module` names (written against agents/public-api.ts).
 * Imported when a gateway starts; its exports are read as data where they are data
 * (module-exports.ts), then checked together with the configured agents by the configuration's
 * cross-checks, so a handoff, an entry agent or a tenant's action may be on either side.
 * Everything wrong is listed at once, by path, as a ConfigError
 * (test/unit/agents/agent-module.test.ts). What the data cannot say (goal, compensation
 * arguments, amount; zod parameters) replaces the compiled tool's parts.
 */
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { agentsIssues, type AgentsConfig, type AgentsIssue } from '../config/agents-schema.ts';
import { ConfigError, formatPath } from '../config/load.ts';
import type { Logger } from '../config/log.ts';
import type { Config } from '../config/schema.ts';
import { AgentCatalogue, type CallFacts, type ToolDefinition } from './agent.ts';
import { agentCatalogue, compileAgents } from './agent-config.ts';
import {
  firstLine,
  isRecord,
  readExports,
  type ModuleTool,
  type ReadExports,
} from './module-exports.ts';
import { moduleAfterPlugin, moduleBeforePlugin } from './module-plugins.ts';
import type { ActionToolSpec } from './public-api.ts';
import {
  DEFAULT_AFTER,
  DEFAULT_BEFORE,
  type AfterToolPlugin,
  type BeforeToolPlugin,
} from './tool-plugins.ts';

/** What a gateway's calls run with: the agents, and the plugins around every tool. */
export interface CallAgents {
  readonly catalogue: AgentCatalogue;
  /** callgate's own plugins first, then the module's in the order it exports them. */
  readonly before: readonly BeforeToolPlugin[];
  readonly after: readonly AfterToolPlugin[];
}

export interface LoadAgentsOptions {
  /** Where an after-tool plugin's failure is logged. */
  readonly log?: Logger;
  /** Import the module afresh, not from the module cache (a reload; each import stays in memory). */
  readonly fresh?: boolean;
}

type AgentsSource = Pick<Config, 'agents' | 'tenants' | 'model'>;

/**
 * The configured agents, and the module's if the configuration names one.
 * @throws ConfigError listing every problem of the module.
 */
export async function loadCallAgents(
  config: AgentsSource,
  options: LoadAgentsOptions = {},
): Promise<CallAgents> {
  const path = config.agents?.module;
  if (path === undefined)
    return { catalogue: agentCatalogue(config), before: DEFAULT_BEFORE, after: DEFAULT_AFTER };
  return readAgentModule(path, await importAgentModule(path, options.fresh), config, options);
}

/** @throws ConfigError when there is no such file or importing it throws. */
export async function importAgentModule(path: string, fresh = false): Promise<unknown> {
  if (!existsSync(path)) throw moduleError(path, [{ path: [], message: 'no such file' }]);
  const url = pathToFileURL(path);
  if (fresh) url.searchParams.set('reload', String(Date.now()));
  try {
    return (await import(url.href)) as unknown;
  } catch (error) {
    throw moduleError(path, [{ path: [], message: `importing it failed: ${firstLine(error)}` }]);
  }
}

/**
 * The agents and plugins of an imported module, with the configured agents, checked and compiled.
 * @throws ConfigError listing every problem by path.
 */
export function readAgentModule(
  path: string,
  exports: unknown,
  config: AgentsSource,
  options: LoadAgentsOptions = {},
): CallAgents {
  const section: AgentsConfig = config.agents ?? { tools: [], list: [] };
  const read = readExports(exports, section);
  if (read.issues.length > 0) throw moduleError(path, read.issues);
  const merged: AgentsConfig = {
    tools: [...section.tools, ...read.tools.map((tool) => tool.view)],
    list: [...section.list, ...read.agents.map((agent) => agent.view)],
  };
  const crossIssues = agentsIssues({
    agents: merged,
    tenants: config.tenants,
    model: config.model,
  });
  if (crossIssues.length > 0)
    throw new ConfigError(
      'agents.module',
      crossIssues.map((issue) => placedProblem(issue, path, section, read)),
    );
  const code = new Map(read.tools.map((tool) => [tool.view.name, tool]));
  const agents = compileAgents({ agents: merged }).map((agent) => ({
    ...agent,
    tools: agent.tools.map((definition) => {
      const tool = code.get(definition.name);
      return tool === undefined || definition.action === undefined
        ? definition
        : withCode(definition, tool);
    }),
  }));
  return {
    catalogue: new AgentCatalogue(agents),
    before: [
      ...DEFAULT_BEFORE,
      ...read.plugins.flatMap(({ name, before }) =>
        before === undefined ? [] : [moduleBeforePlugin({ name, before })],
      ),
    ],
    after: [
      ...DEFAULT_AFTER,
      ...read.plugins.flatMap(({ name, after }) =>
        after === undefined ? [] : [moduleAfterPlugin({ name, after }, options.log)],
      ),
    ],
  };
}

function moduleError(path: string, issues: readonly AgentsIssue[]): ConfigError {
  return new ConfigError(
    'agents.module',
    issues.map((issue) => moduleProblem(path, issue)),
  );
}

/** `agents.module (/srv/clinic.ts): agents[1].tools[0].name: must use only ...` */
function moduleProblem(path: string, issue: AgentsIssue): string {
  const at = formatPath(issue.path);
  return `agents.module (${path}): ${at === '' ? '' : `${at}: `}${issue.message}`;
}

/** A cross-check's problem where its user would look: in the module, or in the configuration. */
function placedProblem(
  issue: AgentsIssue,
  path: string,
  section: AgentsConfig,
  read: ReadExports,
): string {
  const [root, part, index, ...rest] = issue.path;
  if (root === 'agents' && typeof index === 'number') {
    const entry =
      part === 'tools'
        ? read.tools[index - section.tools.length]
        : part === 'list'
          ? read.agents[index - section.list.length]
          : undefined;
    if (entry !== undefined)
      return moduleProblem(path, { path: [...entry.at, ...rest], message: issue.message });
  }
  return `${formatPath(issue.path)}: ${issue.message}`;
}

/** The compiled tool with the module's functions (and zod parameters) in place of templates. */
function withCode(definition: ToolDefinition, tool: ModuleTool): ToolDefinition {
  const spec = tool.spec as unknown as ActionToolSpec;
  const { goal, amount, compensation } = spec;
  const name = definition.name;
  return {
    ...definition,
    ...(tool.zod !== undefined && { parameters: tool.zod }),
    ...(goal !== undefined && {
      goal: (args: Readonly<Record<string, unknown>>, call: CallFacts) =>
        aString(goal(args, call), `goal of tool ${name}`),
    }),
    ...(compensation !== undefined && {
      compensation: {
        action: compensation.action,
        args: (result, source) =>
          compensation.args === undefined
            ? {}
            : aRecord(compensation.args(result, source), `compensation.args of tool ${name}`),
      },
    }),
    ...(amount !== undefined && {
      amount: (args: Readonly<Record<string, unknown>>) =>
        aNumber(amount(args), `amount of tool ${name}`),
    }),
  };
}

/**
 * A module function's answer, of the type the runtime needs.
 * @throws Error otherwise: before admission that is a tool error (nothing admitted), in a
 * plugin's check a refusal.
 */
function aString(value: unknown, what: string): string {
  if (typeof value === 'string') return value;
  throw notA('string', value, what);
}

function aNumber(value: unknown, what: string): number {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  throw notA('number', value, what);
}

function aRecord(value: unknown, what: string): Record<string, unknown> {
  if (isRecord(value)) return value;
  throw notA('mapping of arguments', value, what);
}

function notA(type: string, value: unknown, what: string): Error {
  return new Error(`${what} returned ${String(value)}, not a ${type}`);
}
