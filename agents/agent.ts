/**
 * Agents and tools as data. A tool either runs a business action of the tenant (a read answered
 * inline, or a mutation admitted as a durable operation) or is a control tool the runtime executes
 * (status, cancel, transfer, handoff). Agents say which actions' results they may reveal and to
 * whom they may hand off. The configuration's `agents` section compiles to these
 * (agent-config.ts); nothing in callgate's code defines an agent of its own.
 */
import type { ZodObject, ZodRawShape, z } from 'zod';
import type { ControlTool } from '../config/agents-schema.ts';
import type { CallFacts } from './agent-session.ts';

/** What a control tool answers; serialised to JSON for the model. */
export type ToolOutput = Readonly<Record<string, unknown>> & { readonly status: string };

/** The facts of the call a tool's goal and compensation may use (`{call.caller}` in templates). */
export type { CallFacts } from './agent-session.ts';

/** What a compensation's arguments are made from, besides the committed result. */
export interface CompensationSource {
  /** The arguments of the operation being undone. */
  readonly args: Readonly<Record<string, unknown>>;
  readonly call: CallFacts;
}

export interface ToolDefinition<S extends ZodRawShape = ZodRawShape> {
  readonly name: string;
  readonly description: string;
  /** Validates the model's arguments (invalid ones: a correctable error, nothing admitted). */
  readonly parameters: ZodObject<S>;
  /**
   * The JSON Schema the model is shown, when the tool was declared as one (the configuration):
   * sent as written rather than converted back from `parameters`.
   */
  readonly jsonSchema?: Readonly<Record<string, unknown>>;
  /** The tenant action this tool runs (a key of the tenant's `actions`). */
  readonly action?: string;
  /**
   * The arguments that make two requests the same intent (refund: order and amount), when the
   * tenant's action configuration does not name them (its `intent` wins). Free text and control
   * flags stay out, so a reworded reason or an added `confirmed: true` is the same operation.
   */
  readonly intent?: readonly (keyof z.infer<ZodObject<S>> & string)[];
  /**
   * The goal a request serves ("booking"). A newer request for the same goal in the call
   * supersedes the older one; the gate then speaks an older result only if it had a real effect.
   */
  readonly goal?: (args: z.infer<ZodObject<S>>, call: CallFacts) => string;
  /**
   * How to undo a committed result of this tool: the action to run and its arguments from the
   * result. Used when a newer request for the same goal supersedes a committed one.
   */
  readonly compensation?: {
    readonly action: string;
    readonly args: (
      result: Readonly<Record<string, unknown>>,
      source: CompensationSource,
    ) => Record<string, unknown>;
  };
  /** The amount (in the action's unit) for limits and confirmation. */
  readonly amount?: (args: z.infer<ZodObject<S>>) => number;
  /** A control tool: run by the runtime with the session it belongs to. */
  readonly control?: ControlTool;
}

export interface AgentDefinition {
  readonly name: string;
  readonly instructions: string;
  readonly tools: readonly ToolDefinition[];
  /** Actions whose results this agent may tell the caller. */
  readonly reveals: readonly string[];
  /** Agents this one may hand the call to. */
  readonly handoffs: readonly string[];
  /** The voice of the call's model session; unset, model.openai.voice. */
  readonly voice?: string;
  /** The realtime model of a call it answers; unset, the tenant's, then model.openai.model. */
  readonly model?: string;
  /** Spoken first when it answers a call; unset, the model opens the conversation. */
  readonly greeting?: string;
  /** Where a transfer to a person goes while this agent has the call; unset, the tenant's. */
  readonly transferTarget?: string;
}

export class AgentCatalogue {
  private readonly agents = new Map<string, AgentDefinition>();

  constructor(agents: readonly AgentDefinition[]) {
    for (const agent of agents) this.agents.set(agent.name, agent);
  }

  get(name: string): AgentDefinition | undefined {
    return this.agents.get(name);
  }

  names(): string[] {
    return [...this.agents.keys()];
  }

  mayReveal(agent: string, action: string): boolean {
    return this.agents.get(agent)?.reveals.includes(action) ?? false;
  }
}
