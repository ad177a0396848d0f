/**
 * The configuration's `agents` section compiled to agent definitions. Pure: the section was
 * validated at load (config/agents-schema.ts), instruction files were read there too. Templates
 * are plain field substitution, no code: `{field}` an argument, `{result.field}` the committed
 * result (compensation), `{call.caller}` a call fact (test/unit/agents/agent-config.test.ts).
 */
import { argumentsSchema, type JsonSchema } from '../config/agents-json-schema.ts';
import type {
  AgentConfig,
  AgentToolConfig,
  AgentsConfig,
  ControlTool,
} from '../config/agents-schema.ts';
import type { Config } from '../config/schema.ts';
import {
  AgentCatalogue,
  type AgentDefinition,
  type CallFacts,
  type ToolDefinition,
} from './agent.ts';

/** What a control tool is, unless the configuration words it otherwise. */
const CONTROL_DEFAULTS: Readonly<
  Record<Exclude<ControlTool, 'handoff'>, { description: string; parameters: JsonSchema }>
> = {
  operation_status: {
    description:
      'Tell the state of an operation started earlier in this call. Never guess a state.',
    parameters: {
      type: 'object',
      properties: { operation_id: { type: 'string', minLength: 1, maxLength: 64 } },
      required: ['operation_id'],
    },
  },
  cancel_operation: {
    description:
      'Cancel an operation started in this call. The answer says whether it was cancelled, only requested, cannot be cancelled while running, or already happened (then offer to undo it).',
    parameters: {
      type: 'object',
      properties: { operation_id: { type: 'string', minLength: 1, maxLength: 64 } },
      required: ['operation_id'],
    },
  },
  transfer_to_human: {
    description:
      'Transfer the caller to a person. Operations in progress continue; their results follow by message.',
    parameters: {
      type: 'object',
      properties: { reason: { type: 'string', maxLength: 200 } },
    },
  },
};

const HANDOFF_DESCRIPTION = 'Hand the call to another agent of this line.';

/**
 * The handoff tool validates any agent name: the runtime itself answers one outside the list
 * (already that agent: ok; another: rejected with the list), as the model is shown only the list.
 */
const HANDOFF_ARGUMENTS: JsonSchema = {
  type: 'object',
  properties: { agent: { type: 'string', minLength: 1, maxLength: 64 } },
  required: ['agent'],
};

/** The agents of a configuration; none when it has no `agents` section. */
export function compileAgents(config: Pick<Config, 'agents'>): AgentDefinition[] {
  const section: AgentsConfig | undefined = config.agents;
  if (section === undefined) return [];
  const shared = new Map(section.tools.map((tool) => [tool.name, compileTool(tool)]));
  const configured = new Map(section.tools.map((tool) => [tool.name, tool]));
  const agents = new Map(section.list.map((agent) => [agent.name, agent]));
  return section.list.map((agent) => compileAgent(agent, shared, configured, agents));
}

export function agentCatalogue(config: Pick<Config, 'agents'>): AgentCatalogue {
  return new AgentCatalogue(compileAgents(config));
}

function compileAgent(
  agent: AgentConfig,
  shared: ReadonlyMap<string, ToolDefinition>,
  configured: ReadonlyMap<string, AgentToolConfig>,
  agents: ReadonlyMap<string, AgentConfig>,
): AgentDefinition {
  const tools = agent.tools.flatMap((name) => {
    const tool = configured.get(name);
    if (tool?.control === 'handoff') return [handoffTool(tool, agent, agents)];
    const compiled = shared.get(name);
    return compiled === undefined ? [] : [compiled];
  });
  return {
    name: agent.name,
    // Read from instructionsFile at load when not inline (config/load.ts).
    instructions: agent.instructions ?? '',
    tools,
    reveals: agent.reveals,
    handoffs: agent.handoffs.map((handoff) => handoff.agent),
    ...(agent.voice !== undefined && { voice: agent.voice }),
    ...(agent.model !== undefined && { model: agent.model }),
    ...(agent.greeting !== undefined && { greeting: agent.greeting }),
    ...(agent.transferTarget !== undefined && { transferTarget: agent.transferTarget }),
  };
}

function compileTool(tool: AgentToolConfig): ToolDefinition {
  if (tool.control !== undefined) return controlTool(tool, tool.control);
  const jsonSchema = tool.parameters ?? {};
  const definition: ToolDefinition = {
    name: tool.name,
    description: tool.description ?? '',
    parameters: argumentsSchema(jsonSchema),
    jsonSchema,
    ...(tool.action !== undefined && { action: tool.action }),
    ...(tool.intent !== undefined && { intent: tool.intent }),
    ...(tool.goal !== undefined && { goal: goalOf(tool.goal) }),
    ...(tool.compensation !== undefined && {
      compensation: {
        action: tool.compensation.action,
        args: compensationArgsOf(tool.compensation.args),
      },
    }),
    ...(tool.amount !== undefined && { amount: amountOf(tool.amount.field, tool.amount.scale) }),
  };
  return definition;
}

function controlTool(tool: AgentToolConfig, control: ControlTool): ToolDefinition {
  if (control === 'handoff')
    return {
      name: tool.name,
      description: tool.description ?? HANDOFF_DESCRIPTION,
      parameters: argumentsSchema(HANDOFF_ARGUMENTS),
      control,
    };
  const defaults = CONTROL_DEFAULTS[control];
  const jsonSchema = tool.parameters ?? defaults.parameters;
  return {
    name: tool.name,
    description: tool.description ?? defaults.description,
    parameters: argumentsSchema(jsonSchema),
    jsonSchema,
    control,
  };
}

/**
 * The handoff tool as one agent offers it: the model is shown only this agent's targets, each
 * with its description.
 */
function handoffTool(
  tool: AgentToolConfig,
  agent: AgentConfig,
  agents: ReadonlyMap<string, AgentConfig>,
): ToolDefinition {
  const targets = agent.handoffs.filter((handoff) => agents.has(handoff.agent));
  const listing = targets
    .map((handoff) => `${handoff.agent}${handoff.description ? ` (${handoff.description})` : ''}`)
    .join(', ');
  return {
    name: tool.name,
    description: `${tool.description ?? HANDOFF_DESCRIPTION} Agents: ${listing}.`,
    parameters: argumentsSchema(HANDOFF_ARGUMENTS),
    jsonSchema: {
      type: 'object',
      properties: {
        agent: {
          type: 'string',
          enum: targets.map((handoff) => handoff.agent),
          description: 'The agent to hand the call to.',
        },
      },
      required: ['agent'],
    },
    control: 'handoff',
  };
}

type Values = (name: string) => unknown;

/**
 * Fills a template. One that is a single placeholder keeps the value as it is (a number stays a
 * number, a missing value stays missing); otherwise values are written into the text, a missing
 * one as nothing.
 */
export function fillTemplate(template: string, values: Values): unknown {
  const whole = /^\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\}$/.exec(template);
  if (whole) return values(whole[1] ?? '');
  return template.replace(
    /\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\}/g,
    (_match, name: string) => textOf(values(name)),
  );
}

function textOf(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}

function valuesOf(
  args: Readonly<Record<string, unknown>>,
  call: CallFacts,
  result: Readonly<Record<string, unknown>> = {},
): Values {
  return (name) => {
    if (name.startsWith('call.')) return call[name.slice(5) as keyof CallFacts];
    if (name.startsWith('result.')) return result[name.slice(7)];
    return args[name];
  };
}

function goalOf(template: string): NonNullable<ToolDefinition['goal']> {
  return (args, call) => textOf(fillTemplate(template, valuesOf(args, call)));
}

function compensationArgsOf(
  templates: Readonly<Record<string, string>>,
): NonNullable<ToolDefinition['compensation']>['args'] {
  return (result, source) => {
    const values = valuesOf(source.args, source.call, result);
    return Object.fromEntries(
      Object.entries(templates).map(([name, template]) => [name, fillTemplate(template, values)]),
    );
  };
}

/**
 * field × scale. A scale whose inverse is whole (0.01) divides by the inverse instead, so cents
 * become the same amounts as cents / 100: 35 × 0.01 is 0.35000000000000003 in floating point.
 */
function amountOf(field: string, scale: number): NonNullable<ToolDefinition['amount']> {
  const inverse = Math.round(1 / scale);
  const exactInverse = scale < 1 && Math.abs(1 / scale - inverse) < 1e-9;
  return (args) => {
    const value = Number(args[field]);
    return exactInverse ? value / inverse : value * scale;
  };
}
