/**
 * Plugins around tools. Before-tool plugins run in order and fail closed: a plugin that throws
 * refuses the call. After-tool plugins shape what the model sees (redaction); they run after any
 * effect and cannot undo it.
 */
import type { ActionConfig, TenantConfig } from '../config/schema.ts';
import type { ToolDefinition, ToolOutput } from './agent.ts';
import type { AgentSession, CallFacts } from './agent-session.ts';

export interface PluginContext {
  readonly session: AgentSession;
  /** Who called (verified or not), the number dialled, the tenant and the session. */
  readonly call: CallFacts;
  readonly tenant: TenantConfig;
  readonly tool: ToolDefinition;
  readonly args: Readonly<Record<string, unknown>>;
  /** The tenant's configuration of the tool's action, if the tool runs one. */
  readonly action?: ActionConfig;
  readonly now: number;
}

export type PluginVerdict =
  | { readonly type: 'allow' }
  | { readonly type: 'refuse'; readonly reason: string }
  | { readonly type: 'needs_confirmation'; readonly prompt: string };

export interface BeforeToolPlugin {
  readonly name: string;
  check(context: PluginContext): PluginVerdict | Promise<PluginVerdict>;
}

export interface AfterToolPlugin {
  readonly name: string;
  transform(output: ToolOutput, context: PluginContext): ToolOutput;
}

const ALLOW: PluginVerdict = { type: 'allow' };

/** The tenant must have the tool's action configured, and the caller must not be barred. */
export function authorization(
  options: { deniedCallers?: readonly string[] } = {},
): BeforeToolPlugin {
  return {
    name: 'authorization',
    check: ({ tool, action, session }) => {
      if (tool.action !== undefined && action === undefined)
        return { type: 'refuse', reason: `this line does not offer ${tool.action}` };
      if (session.caller !== undefined && options.deniedCallers?.includes(session.caller))
        return { type: 'refuse', reason: 'this caller may not do that' };
      return ALLOW;
    },
  };
}

/** Above the action's `confirmAbove`, the model must come back with confirmed=true after asking. */
export function confirmation(): BeforeToolPlugin {
  return {
    name: 'confirmation',
    check: ({ tool, action, args }) => {
      if (action?.confirmAbove === undefined || tool.amount === undefined) return ALLOW;
      const amount = tool.amount(args);
      if (amount > action.confirmAbove && args.confirmed !== true) {
        return {
          type: 'needs_confirmation',
          prompt: `Ask the caller to confirm ${amount.toFixed(2)} before calling again with confirmed=true.`,
        };
      }
      return ALLOW;
    },
  };
}

/** A ceiling per request, and at most `perMinute` mutations per call per minute. */
export function limits(options: { maxAmount?: number; perMinute?: number } = {}): BeforeToolPlugin {
  const perMinute = options.perMinute ?? 10;
  return {
    name: 'limits',
    check: ({ tool, args, action, session, now }) => {
      if (
        options.maxAmount !== undefined &&
        tool.amount !== undefined &&
        tool.amount(args) > options.maxAmount
      ) {
        return { type: 'refuse', reason: `amounts above ${options.maxAmount} need a person` };
      }
      if (action?.kind === 'mutation') {
        const recent = session.mutationTimes.filter((t) => now - t < 60_000);
        if (recent.length >= perMinute)
          return { type: 'refuse', reason: 'too many changes in a short time; a person will help' };
      }
      return ALLOW;
    },
  };
}

const CARD = /\b\d(?:[ -]?\d){12,18}\b/g;
const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

/** Masks card numbers and e-mail addresses in what a tool returns to the model. */
export function redaction(): AfterToolPlugin {
  const mask = (value: unknown): unknown => {
    if (typeof value === 'string') return value.replace(CARD, '[card]').replace(EMAIL, '[email]');
    if (Array.isArray(value)) return value.map(mask);
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mask(v)]));
    return value;
  };
  return { name: 'redaction', transform: (output) => mask(output) as ToolOutput };
}

export const DEFAULT_BEFORE: readonly BeforeToolPlugin[] = [
  authorization(),
  confirmation(),
  limits(),
];
export const DEFAULT_AFTER: readonly AfterToolPlugin[] = [redaction()];
