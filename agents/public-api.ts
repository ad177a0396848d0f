/**
 * callgate's public API: agents, tools and plugins written in TypeScript (or JavaScript) for what
 * the configuration's data cannot say. The module that `agents.module` names imports this file as
 * `callgate` (package.json `exports`) and exports what it defines:
 *
 * ```ts
 * import { z } from 'zod';
 * import { defineAgent, plugin, tool } from 'callgate';
 *
 * const bookVisit = tool({
 *   name: 'book_visit',
 *   description: 'Book a visit. Answers at once with an operation id; the result follows.',
 *   parameters: z.object({ clinic: z.enum(['north', 'south']), date: z.iso.date(), name: z.string() }),
 *   action: 'book_visit', // a key of the tenant's `actions`
 *   intent: ['clinic', 'date'], // the same clinic and date is the same visit, however the name is spelt
 *   goal: (args) => `visit:${args.clinic}`, // a newer visit at the clinic supersedes the older one
 * });
 * const status = tool({ name: 'operation_status', control: 'operation_status' });
 *
 * export const agents = [
 *   defineAgent({ name: 'clinic', instructions: 'You book visits.', tools: [bookVisit, status] }),
 * ];
 * export const plugins = [
 *   plugin({
 *     name: 'known-callers',
 *     before: ({ call }) =>
 *       call.caller === undefined ? { type: 'refuse', reason: 'we need your number' } : { type: 'allow' },
 *   }),
 * ];
 * ```
 *
 * - Exports: `agents` and `plugins` (arrays), or a default export `{ agents, plugins }`
 *   (`satisfies AgentModuleExports`). Module agents join the configuration's (`agents.list`); a
 *   name may be defined once. Handoffs and tenants' entry agents may name agents of either.
 * - A goal or amount function that throws (or returns the wrong type) stops the tool call before
 *   anything is admitted; a compensation's `args` that throws leaves the superseded result as it
 *   is (the undo is recorded as refused).
 * - Checked when the gateway starts, as the configuration is: names, JSON Schemas (a zod object is
 *   converted; what function calling does not take is refused), intent fields, the tenants'
 *   actions. A module that throws, is missing or exports something invalid stops the start with
 *   every problem by path (`agents.module (/srv/agents.ts): agents[0].tools[1].name: ...`).
 * - Tools run as configured ones do: arguments validated by `parameters`; an `action` is a read
 *   answered inline or a mutation admitted as a durable operation. `goal`, `compensation.args`
 *   and `amount` are functions here, where the configuration has templates.
 * - Plugins run after callgate's own (authorization, confirmation, limits; redaction), for every
 *   tool of every agent, in the order exported. A `before` that throws, or returns anything but a
 *   verdict, refuses the call (fail closed). An `after` that throws, or returns no output, hides
 *   the output: the model gets the status and operation id only.
 */
import type { ZodObject, z } from 'zod';
import type { ControlTool } from '../config/agents-schema.ts';
import type { CallFacts, ToolOutput } from './agent.ts';

export type { CallFacts, ControlTool, ToolOutput };

/** A JSON Schema of the arguments (`type: object`), as OpenAI function calling takes it. */
export type JsonSchemaObject = Readonly<Record<string, unknown>>;

/** A zod object, or a JSON Schema object. */
export type ToolParameters = ZodObject | JsonSchemaObject;

/** The arguments a tool's functions receive: validated, typed by a zod `parameters`. */
export type ToolArguments<P extends ToolParameters> = P extends ZodObject
  ? z.output<P>
  : Readonly<Record<string, unknown>>;

/** A tool that runs one of the tenant's actions (a key of `tenants[].actions`). */
export interface ActionToolSpec<P extends ToolParameters = ToolParameters> {
  /** What the model calls it: letters, digits, _ and - (at most 64). */
  readonly name: string;
  /** What the model reads to choose the tool. */
  readonly description: string;
  readonly parameters: P;
  readonly action: string;
  readonly control?: undefined;
  /** The arguments that make two requests the same intent (the idempotency key's fields). */
  readonly intent?: readonly (keyof ToolArguments<P> & string)[];
  /** A newer request for the same goal in the call supersedes an older one (`visit:north`). */
  readonly goal?: (args: ToolArguments<P>, call: CallFacts) => string;
  /** How a committed result is undone: the action, and its arguments from the result. */
  readonly compensation?: {
    readonly action: string;
    readonly args: (
      result: Readonly<Record<string, unknown>>,
      source: { readonly args: ToolArguments<P>; readonly call: CallFacts },
    ) => Record<string, unknown>;
  };
  /** The amount (in the action's unit) that limits and `confirmAbove` compare. */
  readonly amount?: (args: ToolArguments<P>) => number;
}

/** A tool callgate itself runs: status, cancel, transfer to a person, handoff. */
export interface ControlToolSpec {
  readonly name: string;
  readonly control: ControlTool;
  /** Unset: callgate's own wording. */
  readonly description?: string;
  /** Unset: callgate's own; a handoff's are made per agent from its handoffs. */
  readonly parameters?: ToolParameters;
  readonly action?: undefined;
}

/** A tool, as `tool()` makes it; an agent lists it in its `tools`. */
export type Tool = Readonly<ActionToolSpec> | Readonly<ControlToolSpec>;

export interface AgentSpec {
  /** a-z first, then a-z, 0-9, _ and - (at most 63): it becomes part of Redis keys. */
  readonly name: string;
  readonly instructions: string;
  /** Unset: model.openai.voice. Agents of one call share one voice. */
  readonly voice?: string;
  /** Unset: the tenant's model, then model.openai.model. Agents of one call share one model. */
  readonly model?: string;
  /** Spoken first when the call is answered; unset, the model opens the conversation. */
  readonly greeting?: string;
  readonly tools?: readonly Tool[];
  /** Actions whose results this agent may tell the caller. */
  readonly reveals?: readonly string[];
  /** Agents (of the module or the configuration) it may hand the call to, as the model sees them. */
  readonly handoffs?: readonly { readonly agent: string; readonly description?: string }[];
  /** Where a transfer to a person goes while this agent has the call (sip:, sips: or tel:). */
  readonly transferTarget?: string;
}

/** An agent, as `defineAgent()` makes it. */
export type Agent = Readonly<AgentSpec>;

/** What a plugin knows of the tool call it is asked about. */
export interface ToolCallContext {
  /** Who called, the number dialled, the tenant and the session. */
  readonly call: CallFacts;
  readonly tenant: { readonly id: string; readonly name?: string };
  /** The agent that has the call. */
  readonly agent: string;
  readonly tool: {
    readonly name: string;
    readonly action?: string;
    readonly control?: ControlTool;
  };
  /** The arguments, validated by the tool's parameters. */
  readonly args: Readonly<Record<string, unknown>>;
  /** The tenant's action the tool runs, if it runs one. */
  readonly action?: {
    readonly name: string;
    readonly kind: 'read' | 'mutation';
    readonly money: boolean;
    readonly confirmAbove?: number;
  };
  /** The tool's amount for these arguments, if it declares one. */
  readonly amount?: number;
  /** Milliseconds since the epoch. */
  readonly now: number;
}

/** What a before-tool plugin decides. */
export type Verdict =
  | { readonly type: 'allow' }
  | { readonly type: 'refuse'; readonly reason: string }
  | { readonly type: 'needs_confirmation'; readonly prompt: string };

export interface PluginSpec {
  /** Names it in logs and metrics; unique, and not one of callgate's own plugins. */
  readonly name: string;
  /** Before the tool runs: allow it, refuse it, or send the model back to ask the caller first. */
  readonly before?: (context: ToolCallContext) => Verdict | Promise<Verdict>;
  /** After it ran (any effect has happened): what the model sees of its output. */
  readonly after?: (output: ToolOutput, context: ToolCallContext) => ToolOutput;
}

/** A plugin, as `plugin()` makes it. */
export type Plugin = Readonly<PluginSpec>;

/** What a module exports by default, if not `agents` and `plugins` by name. */
export interface AgentModuleExports {
  readonly agents?: readonly Agent[];
  readonly plugins?: readonly Plugin[];
}

export function defineAgent(spec: AgentSpec): Agent {
  return spec;
}

/** A tool; with zod `parameters`, its intent, goal, compensation and amount are typed by them. */
export function tool<P extends ToolParameters>(spec: ActionToolSpec<P>): Tool;
export function tool(spec: ControlToolSpec): Tool;
export function tool(spec: ActionToolSpec<ToolParameters> | ControlToolSpec): Tool {
  return spec;
}

export function plugin(spec: PluginSpec): Plugin {
  return spec;
}
