/**
 * A module's plugins (agents/public-api.ts) as the tool runtime runs them. Both directions fail
 * closed (test/integration/agents/module-plugin-fails-closed.test.ts): a `before` that throws or
 * answers anything but a verdict refuses the tool (the runtime refuses on a throw), an `after`
 * that throws or returns no output hides the output but its status and operation id. Plugins see
 * a copy of the arguments: what they do to it changes nothing that is admitted.
 */
import type { Logger } from '../config/log.ts';
import type { ToolOutput } from './agent.ts';
import type { Plugin, ToolCallContext, Verdict } from './public-api.ts';
import type {
  AfterToolPlugin,
  BeforeToolPlugin,
  PluginContext,
  PluginVerdict,
} from './tool-plugins.ts';

export function moduleBeforePlugin(
  plugin: Plugin & { before: NonNullable<Plugin['before']> },
): BeforeToolPlugin {
  return {
    name: plugin.name,
    check: async (context) => verdictOf(await plugin.before(toolCallContext(context)), plugin.name),
  };
}

export function moduleAfterPlugin(
  plugin: Plugin & { after: NonNullable<Plugin['after']> },
  log?: Logger,
): AfterToolPlugin {
  return {
    name: plugin.name,
    transform: (output, context) => {
      try {
        const shaped: unknown = plugin.after(output, toolCallContext(context));
        if (isToolOutput(shaped)) return shaped;
        log?.error('after-tool plugin returned no tool output', { plugin: plugin.name });
      } catch (error) {
        log?.error('after-tool plugin failed', { plugin: plugin.name, error });
      }
      return withheld(output);
    },
  };
}

/** The public view of a tool call: no session object, no configuration beyond the action's. */
function toolCallContext(context: PluginContext): ToolCallContext {
  const { session, tenant, tool, action } = context;
  const args = structuredClone(context.args) as Record<string, unknown>;
  return {
    call: session.call,
    tenant: { id: tenant.id, ...(tenant.name !== undefined && { name: tenant.name }) },
    agent: session.activeAgent,
    tool: {
      name: tool.name,
      ...(tool.action !== undefined && { action: tool.action }),
      ...(tool.control !== undefined && { control: tool.control }),
    },
    args,
    ...(tool.action !== undefined &&
      action !== undefined && {
        action: {
          name: tool.action,
          kind: action.kind,
          money: action.money,
          ...(action.confirmAbove !== undefined && { confirmAbove: action.confirmAbove }),
        },
      }),
    ...(tool.amount !== undefined && { amount: tool.amount(args) }),
    now: context.now,
  };
}

/** @throws Error when the plugin answered no verdict, which the runtime turns into a refusal. */
function verdictOf(value: Verdict | undefined, plugin: string): PluginVerdict {
  const verdict = value as Partial<Record<'type' | 'reason' | 'prompt', unknown>> | undefined;
  if (verdict?.type === 'allow') return { type: 'allow' };
  if (verdict?.type === 'refuse' && typeof verdict.reason === 'string' && verdict.reason !== '')
    return { type: 'refuse', reason: verdict.reason };
  if (
    verdict?.type === 'needs_confirmation' &&
    typeof verdict.prompt === 'string' &&
    verdict.prompt !== ''
  )
    return { type: 'needs_confirmation', prompt: verdict.prompt };
  throw new Error(
    `plugin ${plugin} answered no verdict ({ type: 'allow' | 'refuse' | 'needs_confirmation' })`,
  );
}

function isToolOutput(value: unknown): value is ToolOutput {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { status?: unknown }).status === 'string'
  );
}

/** What the model may still know when a plugin could not shape an output: what happened, no detail. */
function withheld(output: ToolOutput): ToolOutput {
  return {
    status: output.status,
    ...(typeof output.operation_id === 'string' && { operation_id: output.operation_id }),
    error: 'output_withheld',
    message: `The details of this answer cannot be shown; its status (${output.status}) stands. Do not guess the details.`,
  };
}
