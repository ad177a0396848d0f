/**
 * The tool runtime: what happens between the model asking for a tool and the model getting an
 * answer. The answer is always fast and honest:
 *   - bad arguments, unknown tools, refusals: a structured result the model can recover from;
 *   - reads run inline within a deadline;
 *   - mutations go to admission and answer at once: started (with the operation id), duplicate,
 *     busy, degraded, needs_confirmation. The result itself comes later, through the gate.
 * A duplicate is recognised by the idempotency key (admission), never by tool name or call id.
 */
import { CallgateError, isCallgateError } from '../config/errors.ts';
import type { Logger } from '../config/log.ts';
import { counter } from '../config/metrics.ts';
import type { ActionConfig, TenantConfig } from '../config/schema.ts';
import { formatIssues } from '../config/load.ts';
import type { ActionLayer, CompensationDecision } from '../jobs/action-layer.ts';
import type { AdmissionDecision } from '../jobs/admission/admission.ts';
import { IdempotencyConflictError } from '../jobs/ledger/ledger-errors.ts';
import type { Operation } from '../jobs/ledger/operation.ts';
import type { AgentCatalogue, ToolDefinition, ToolOutput } from './agent.ts';
import type { AgentSession } from './agent-session.ts';
import type { AuditLog } from './audit.ts';
import type { SpokenOutcome } from './result-delivery.ts';
import {
  DEFAULT_AFTER,
  DEFAULT_BEFORE,
  type AfterToolPlugin,
  type BeforeToolPlugin,
  type PluginContext,
} from './tool-plugins.ts';

const toolCalls = counter({
  name: 'callgate_tool_calls_total',
  help: 'Tool calls from the model by tool and outcome.',
  labelNames: ['tool', 'outcome'],
});

const pluginRefusals = counter({
  name: 'callgate_tool_plugin_refusals_total',
  help: 'Tool calls refused (or sent back for confirmation) by a before-tool plugin.',
  labelNames: ['plugin', 'verdict'],
});

export const handoffsWithPending = counter({
  name: 'callgate_handoffs_total',
  help: 'Handoffs between agents, by whether operations were pending.',
  labelNames: ['pending'],
});

/** How long a read may take before the model is told it is slow (the call must not wait in silence). */
export const READ_DEADLINE_MS = 3_000;

export interface ToolCall {
  readonly callId: string;
  readonly name: string;
  /** Parsed JSON arguments, or the raw text when the model sent something that is not JSON. */
  readonly arguments: unknown;
  readonly responseId?: string;
}

/** What the call layer does for control tools. */
export interface CallControl {
  transfer(reason: string | undefined): Promise<{ readonly ok: boolean; readonly detail: string }>;
}

export interface ToolRuntimeOptions {
  readonly catalogue: AgentCatalogue;
  readonly tenants: ReadonlyMap<string, TenantConfig>;
  readonly actions: Pick<ActionLayer, 'admit' | 'cancel' | 'compensate' | 'waitFor' | 'ledger'>;
  readonly audit: AuditLog;
  readonly log: Logger;
  readonly before?: readonly BeforeToolPlugin[];
  readonly after?: readonly AfterToolPlugin[];
  readonly readDeadlineMs?: number;
  readonly now?: () => number;
}

export class ToolRuntime {
  private readonly before: readonly BeforeToolPlugin[];
  private readonly after: readonly AfterToolPlugin[];
  private readonly now: () => number;
  /** Reads answered in a tool output the caller has not heard yet, by call and the model's call id. */
  private readonly inline = new WeakMap<AgentSession, Map<string, Operation>>();

  constructor(private readonly options: ToolRuntimeOptions) {
    for (const unkeyed of checkIntentFields(options.catalogue, options.tenants)) {
      options.log.warn(
        'mutation keyed by all its arguments: a reworded free-text argument or an added flag starts a second operation; declare its intent fields (actions.<name>.intent, or intent: all)',
        unkeyed,
      );
    }
    this.before = options.before ?? DEFAULT_BEFORE;
    this.after = options.after ?? DEFAULT_AFTER;
    this.now = options.now ?? Date.now;
  }

  /** The tools an agent offers the model, in the agents release the call runs with. */
  toolsFor(agent: string, session?: AgentSession): readonly ToolDefinition[] {
    return this.catalogueOf(session).get(agent)?.tools ?? [];
  }

  /** A call keeps the agents it started with; a reload gives later calls new ones. */
  private catalogueOf(session: AgentSession | undefined): AgentCatalogue {
    return session?.catalogue ?? this.options.catalogue;
  }

  async handle(session: AgentSession, call: ToolCall, control?: CallControl): Promise<ToolOutput> {
    const { audit } = this.options;
    await audit.record(
      session.sessionId,
      {
        type: 'tool_requested',
        tool: call.name,
        callId: call.callId,
        responseId: call.responseId,
        args: call.arguments,
      },
      session.turnId,
    );
    const output = await this.run(session, call, control);
    toolCalls.labels(call.name, output.status).inc();
    await audit.record(
      session.sessionId,
      {
        type: 'tool_answered',
        tool: call.name,
        callId: call.callId,
        status: output.status,
        operationId: typeof output.operation_id === 'string' ? output.operation_id : undefined,
        idempotencyKey:
          typeof output.idempotency_key === 'string' ? output.idempotency_key : undefined,
      },
      session.turnId,
    );
    return output;
  }

  private async run(
    session: AgentSession,
    call: ToolCall,
    control: CallControl | undefined,
  ): Promise<ToolOutput> {
    const tenant = this.options.tenants.get(session.tenantId);
    const tool = this.toolsFor(session.activeAgent, session).find((t) => t.name === call.name);
    if (!tenant || !tool) {
      return {
        status: 'error',
        error: 'unknown_tool',
        message: `The ${session.activeAgent} agent has no tool ${call.name}.`,
      };
    }
    if (
      typeof call.arguments === 'string' ||
      call.arguments === null ||
      typeof call.arguments !== 'object'
    ) {
      return {
        status: 'error',
        error: 'invalid_arguments',
        message: 'The arguments must be a JSON object.',
      };
    }
    const parsed = tool.parameters.safeParse(call.arguments);
    if (!parsed.success) {
      return {
        status: 'error',
        error: 'invalid_arguments',
        message: 'Some arguments are not valid; ask the caller and try again.',
        problems: formatIssues(parsed.error.issues),
      };
    }
    const args = parsed.data as Record<string, unknown>;
    const action = tool.action === undefined ? undefined : tenant.actions[tool.action];
    const context: PluginContext = {
      session,
      call: session.call,
      tenant,
      tool,
      args,
      action,
      now: this.now(),
    };
    for (const plugin of this.before) {
      let verdict;
      try {
        verdict = await plugin.check(context);
      } catch (error) {
        // Fail closed: a plugin that cannot decide refuses.
        verdict = { type: 'refuse' as const, reason: `the ${plugin.name} check failed` };
        this.options.log.error('before-tool plugin failed', { plugin: plugin.name, error });
      }
      if (verdict.type === 'allow') continue;
      pluginRefusals.labels(plugin.name, verdict.type).inc();
      await this.options.audit.record(
        session.sessionId,
        {
          type: 'tool_refused',
          tool: tool.name,
          callId: call.callId,
          by: plugin.name,
          reason: verdict.type === 'refuse' ? verdict.reason : verdict.prompt,
        },
        session.turnId,
      );
      return verdict.type === 'refuse'
        ? { status: 'rejected', error: 'refused', message: verdict.reason }
        : { status: 'needs_confirmation', message: verdict.prompt };
    }
    const limit = tenant.maxToolsPerSession;
    if (session.toolsInFlight >= limit) {
      return {
        status: 'busy',
        error: 'too_many_tools',
        message: `At most ${limit} tools may run at once in a call; wait for one to finish.`,
      };
    }
    session.toolsInFlight++;
    try {
      const output = await this.dispatch(session, call, tool, args, action, control);
      return this.after.reduce((out, plugin) => plugin.transform(out, context), output);
    } finally {
      session.toolsInFlight--;
    }
  }

  private async dispatch(
    session: AgentSession,
    call: ToolCall,
    tool: ToolDefinition,
    args: Record<string, unknown>,
    action: ActionConfig | undefined,
    control: CallControl | undefined,
  ): Promise<ToolOutput> {
    if (tool.control !== undefined) return this.control(session, tool.control, args, control);
    if (tool.action === undefined || action === undefined)
      return {
        status: 'error',
        error: 'not_configured',
        message: 'This tool is not available on this line.',
      };
    const scope = {
      ...session.operationScope,
      agent: session.activeAgent,
      turnId: String(session.turnId),
      providerCallId: call.callId,
      responseId: call.responseId,
      goal: tool.goal?.(args, session.call),
    };
    let decision: AdmissionDecision;
    try {
      decision = await this.options.actions.admit({
        tenantId: session.tenantId,
        action: tool.action,
        args,
        scope,
        intentFields: tool.intent,
      });
    } catch (error) {
      if (error instanceof IdempotencyConflictError) {
        return {
          status: 'rejected',
          error: 'conflict',
          operation_id: error.operationId,
          message: 'A different request with the same key exists.',
        };
      }
      if (isCallgateError(error))
        return { status: 'error', error: error.code, message: error.message };
      throw error;
    }
    if (action.kind === 'read') return this.read(session, call, decision, tool);
    return this.mutation(session, call, tool, args, decision);
  }

  private async read(
    session: AgentSession,
    call: ToolCall,
    decision: AdmissionDecision,
    tool: ToolDefinition,
  ): Promise<ToolOutput> {
    if (decision.type === 'busy')
      return {
        status: 'busy',
        message: 'That lookup is busy right now; try again shortly.',
        retry_after_ms: decision.retryAfterMs,
      };
    if (decision.type === 'degraded') return { status: 'degraded', message: decision.fallback };
    const deadline = this.options.readDeadlineMs ?? READ_DEADLINE_MS;
    // Owned like any operation: a re-opened model session's summary lists it until it is told.
    session.own({
      operationId: decision.operationId,
      action: tool.action ?? tool.name,
      tool: tool.name,
      agent: session.activeAgent,
    });
    session.answeringInline.add(decision.operationId);
    let op: Operation | undefined;
    try {
      op = await this.options.actions.waitFor(session.tenantId, decision.operationId, deadline);
    } finally {
      if (!(op !== undefined && answersInline(op)))
        session.answeringInline.delete(decision.operationId);
    }
    if (answersInline(op)) this.unheard(session).set(call.callId, op);
    if (op?.state === 'COMMITTED') return { status: 'ok', result: op.result ?? {} };
    if (op?.state === 'FAILED_FINAL' || op?.state === 'CANCELLED')
      return {
        status: 'failed',
        message: op.error?.message ?? 'The lookup failed.',
        error: op.error?.code ?? 'failed',
      };
    return {
      status: 'timeout',
      message: `The ${tool.name} lookup is slow; tell the caller you are still checking.`,
    };
  }

  /**
   * The read whose result the output for `callId` carries, while the caller has not heard it. The
   * call sends that output and reports how it fared with `settleInlineAnswer`.
   */
  inlineAnswer(session: AgentSession, callId: string): string | undefined {
    return this.inline.get(session)?.get(callId)?.operationId;
  }

  /**
   * A read answered inside a tool output is told only when the caller heard it: the output reached
   * the model session that asked and that session's response speaking it played to its end
   * (`outcome` completed). Until then delivery holds its result event (AgentSession.answeringInline).
   * Cut, lost with its session, or never sent (`outcome` undefined): the read is released, and
   * delivery gates its event like any other result, on whichever session the call has then
   * (test/scenarios/model-lost-between-read-commit-and-output.test.ts). The record is this call's:
   * another call sharing the read (coalesced) is told on its own.
   */
  async settleInlineAnswer(
    session: AgentSession,
    callId: string,
    outcome: SpokenOutcome | undefined,
  ): Promise<void> {
    const answers = this.inline.get(session);
    const op = answers?.get(callId);
    if (answers === undefined || op === undefined) return;
    answers.delete(callId);
    try {
      if (outcome?.status === 'completed') await this.toldInToolOutput(session, op, outcome);
    } finally {
      if (![...answers.values()].some((other) => other.operationId === op.operationId))
        session.answeringInline.delete(op.operationId);
    }
  }

  private unheard(session: AgentSession): Map<string, Operation> {
    let answers = this.inline.get(session);
    if (answers === undefined) {
      answers = new Map();
      this.inline.set(session, answers);
    }
    return answers;
  }

  /** Makes the gate find the read told (already_told): its result event is not spoken again. */
  private async toldInToolOutput(
    session: AgentSession,
    op: Operation,
    outcome: SpokenOutcome,
  ): Promise<void> {
    const owned = session.operations.get(op.operationId);
    if (owned) owned.told = true;
    const committedAt = op.committedAt ?? op.finishedAt;
    await this.options.actions.ledger.advanceDelivery(
      op,
      {
        decision: 'told_in_tool_output',
        reasons: ['read_answered_inline'],
        at: this.now(),
        agent: session.activeAgent,
        responseId: outcome.responseId,
        channel: 'voice',
        delivered: true,
        ...(committedAt !== undefined &&
          outcome.firstAudioAt !== undefined && {
            commitToAudibleMs: Math.max(0, outcome.firstAudioAt - committedAt),
          }),
      },
      session.sessionId,
    );
  }

  private async mutation(
    session: AgentSession,
    call: ToolCall,
    tool: ToolDefinition,
    args: Record<string, unknown>,
    decision: AdmissionDecision,
  ): Promise<ToolOutput> {
    switch (decision.type) {
      case 'busy':
        return {
          status: 'busy',
          message: 'The system is busy with other requests; offer to try again in a moment.',
          retry_after_ms: decision.retryAfterMs,
        };
      case 'degraded':
        return { status: 'degraded', message: decision.fallback };
      case 'coalesced':
      case 'duplicate': {
        const owned = session.operations.get(decision.operationId);
        if (
          owned &&
          owned.openCallId === undefined &&
          decision.state !== 'COMMITTED' &&
          decision.state !== 'FAILED_FINAL'
        )
          owned.openCallId = call.callId;
        return {
          status: 'duplicate',
          operation_id: decision.operationId,
          state: decision.state,
          message:
            'This is the same request as one already made in this call; nothing new was started.',
        };
      }
      case 'started': {
        session.mutationTimes.push(this.now());
        const goal = tool.goal?.(args, session.call);
        const superseded = session.own({
          operationId: decision.operationId,
          action: tool.action ?? tool.name,
          tool: tool.name,
          agent: session.activeAgent,
          goal,
          openCallId: call.callId,
        });
        const undo = superseded
          ? await this.supersede(session, superseded.operationId, decision.operationId)
          : undefined;
        return {
          status: 'started',
          operation_id: decision.operationId,
          idempotency_key: decision.idempotencyKey,
          queued: decision.queued,
          message:
            'Started. Tell the caller it is being confirmed; the result will follow. Do not say it is done yet.',
          ...(undo === undefined ? {} : { earlier_request: undo }),
        };
      }
    }
  }

  /**
   * A newer request for the same goal: cancel the older one if it has not started, undo it if it
   * committed; if it is running without cancel support it is left alone and the gate will tell the
   * caller what really happened.
   */
  private async supersede(
    session: AgentSession,
    older: string,
    newer: string,
  ): Promise<string | undefined> {
    const { actions, audit } = this.options;
    const cancel = await actions.cancel(session.tenantId, older).catch((error: unknown) => {
      this.options.log.warn('cancel of a superseded operation failed', {
        operation_id: older,
        error,
      });
      return undefined;
    });
    if (cancel?.type === 'cancelled' || cancel?.type === 'requested') {
      await audit.record(
        session.sessionId,
        {
          type: 'superseded',
          operationId: older,
          by: newer,
          action: 'cancelled',
          detail: cancel.type,
        },
        session.turnId,
      );
      return;
    }
    if (cancel?.type === 'committed')
      return undoNote(older, await this.compensate(session, older, newer));
    await audit.record(
      session.sessionId,
      {
        type: 'superseded',
        operationId: older,
        by: newer,
        action: 'left_running',
        detail: cancel?.type,
      },
      session.turnId,
    );
    return undefined;
  }

  /**
   * Undoes a committed operation with its tool's declared compensation. The call owns the
   * compensation like any operation it started, so its result (an undo that failed included) is
   * told through the gate; one that cannot be admitted now is owed and admitted later by workers.
   */
  async compensate(
    session: AgentSession,
    operationId: string,
    because: string,
  ): Promise<CompensationDecision['type'] | 'refused' | undefined> {
    const owned = session.operations.get(operationId);
    const tool = owned
      ? this.toolsFor(owned.agent, session).find((t) => t.name === owned.tool)
      : undefined;
    const op = await this.options.actions.ledger.get(session.tenantId, operationId);
    if (!tool?.compensation || !op?.result) return undefined;
    const action = tool.compensation.action;
    const compensationTool = this.toolsFor(session.activeAgent, session).find(
      (t) => t.action === action,
    );
    let outcome: CompensationDecision['type'] | 'refused';
    try {
      const decision = await this.options.actions.compensate(op, {
        action,
        args: tool.compensation.args(op.result, { args: op.params, call: session.call }),
        intentFields: compensationTool?.intent,
        scope: {
          ...session.operationScope,
          agent: session.activeAgent,
          turnId: String(session.turnId),
        },
      });
      if (decision.type === 'admitted') {
        session.own({
          operationId: decision.decision.operationId,
          action,
          tool: compensationTool?.name ?? action,
          agent: session.activeAgent,
        });
      }
      outcome = decision.type;
    } catch (error) {
      // Refused at admission (the compensator counts and logs a refusal) or Redis unreachable: not undone now.
      this.options.log.error('compensation could not be requested', {
        operation_id: operationId,
        action,
        error,
      });
      outcome = 'refused';
    }
    await this.options.audit.record(
      session.sessionId,
      { type: 'superseded', operationId, by: because, action: 'compensating', detail: outcome },
      session.turnId,
    );
    return outcome;
  }

  private async control(
    session: AgentSession,
    kind: NonNullable<ToolDefinition['control']>,
    args: Record<string, unknown>,
    control: CallControl | undefined,
  ): Promise<ToolOutput> {
    const { actions, audit } = this.options;
    const catalogue = this.catalogueOf(session);
    const isRead = (action: string): boolean =>
      this.options.tenants.get(session.tenantId)?.actions[action]?.kind === 'read';
    switch (kind) {
      case 'operation_status': {
        const id = resolveOperation(session, args.operation_id, isRead);
        const op = session.operations.has(id)
          ? await actions.ledger.get(session.tenantId, id)
          : undefined;
        if (!op)
          return {
            status: 'error',
            error: 'not_found',
            message: 'No operation with that id in this call.',
          };
        const reveal = catalogue.mayReveal(session.activeAgent, op.action);
        return {
          status: 'ok',
          operation_id: id,
          state: op.state,
          ...(reveal
            ? { result: op.result, error: op.error }
            : { note: 'Another agent handles the details of this operation.' }),
          message:
            op.state === 'UNKNOWN'
              ? 'Still being confirmed with the provider; do not say it succeeded or failed.'
              : `The operation is ${op.state}.`,
        };
      }
      case 'cancel_operation': {
        const id = resolveOperation(session, args.operation_id, isRead);
        if (!session.operations.has(id))
          return {
            status: 'error',
            error: 'not_found',
            message: 'No operation with that id in this call.',
          };
        const decision = await actions.cancel(session.tenantId, id);
        const messages: Record<typeof decision.type, string> = {
          cancelled: 'Cancelled before it reached the provider.',
          requested:
            'Cancellation requested; the provider has not confirmed yet. Do not say it is cancelled.',
          not_cancellable:
            'It cannot be cancelled now: it is already with the provider (or being confirmed). Its result will follow.',
          committed: 'It already happened. Offer to undo it (for a booking: cancel the booking).',
          already_final: 'It already ended.',
        };
        return { status: decision.type, operation_id: id, message: messages[decision.type] };
      }
      case 'transfer_to_human': {
        if (!control)
          return {
            status: 'error',
            error: 'not_available',
            message: 'Transfer is not available on this call.',
          };
        const pending = [...session.operations.values()].filter((o) => !o.told).length;
        const result = await control.transfer(
          typeof args.reason === 'string' ? args.reason : undefined,
        );
        await audit.record(
          session.sessionId,
          { type: 'transfer', target: result.detail, pending },
          session.turnId,
        );
        return result.ok
          ? {
              status: 'ok',
              message:
                'Transferring now. Say goodbye briefly; pending results will be sent by message.',
            }
          : {
              status: 'failed',
              message: 'The transfer did not go through. Apologise and keep helping.',
            };
      }
      case 'handoff': {
        const target = String(args.agent);
        // Already the agent on the call (a model repeating itself): nothing changes, nothing is refused.
        if (target === session.activeAgent)
          return { status: 'ok', agent: target, message: `You are already the ${target} agent.` };
        const from = catalogue.get(session.activeAgent);
        if (!from?.handoffs.includes(target) || !catalogue.get(target)) {
          return {
            status: 'rejected',
            error: 'unknown_agent',
            message: `Cannot hand off to ${target}.`,
            agents: from?.handoffs ?? [],
          };
        }
        const pending = [...session.operations.values()].filter((o) => !o.told).length;
        handoffsWithPending.labels(pending > 0 ? 'yes' : 'no').inc();
        await audit.record(
          session.sessionId,
          { type: 'handoff', from: session.activeAgent, to: target, pending },
          session.turnId,
        );
        session.activeAgent = target;
        return {
          status: 'ok',
          agent: target,
          pending_operations: pending,
          message: `You are now the ${target} agent.`,
        };
      }
    }
  }
}

/**
 * Intent fields must be arguments of the tools that run the action: a misspelt one would count as
 * absent in every request, and two refunds of different amounts would then be one intent. Returns
 * the mutations keyed by all their arguments without anyone choosing so (no `intent` configured,
 * none declared by a tool running them), for a warning.
 */
function checkIntentFields(
  catalogue: AgentCatalogue,
  tenants: ReadonlyMap<string, TenantConfig>,
): { tenant: string; action: string }[] {
  const declaredByTool = new Set<string>();
  for (const agent of catalogue.names()) {
    for (const tool of catalogue.get(agent)?.tools ?? []) {
      if (tool.action === undefined) continue;
      if (tool.intent !== undefined && tool.intent.length > 0) declaredByTool.add(tool.action);
      const known = new Set(Object.keys(tool.parameters.shape));
      const declared: [string, readonly string[] | undefined][] = [['the tool', tool.intent]];
      for (const tenant of tenants.values()) {
        const configured = tenant.actions[tool.action]?.intent;
        declared.push([
          `tenants[${tenant.id}].actions.${tool.action}.intent`,
          Array.isArray(configured) ? configured : undefined,
        ]);
      }
      for (const [where, fields] of declared) {
        const unknown = (fields ?? []).find((field) => !known.has(field));
        if (unknown !== undefined)
          throw new CallgateError('CALLGATE_ERR_CONFIG_UNKNOWN_INTENT_FIELD', {
            field: unknown,
            where,
            tool: tool.name,
          });
      }
    }
  }
  const unkeyed: { tenant: string; action: string }[] = [];
  for (const tenant of tenants.values()) {
    for (const [action, config] of Object.entries(tenant.actions)) {
      if (config.kind === 'mutation' && config.intent === undefined && !declaredByTool.has(action))
        unkeyed.push({ tenant: tenant.id, action });
    }
  }
  return unkeyed;
}

/**
 * What the model must know at once about the request a new one replaced, when undoing it did not
 * start: an undo owed for later is not done yet, and one that failed or was refused leaves it in
 * place. An admitted undo says nothing here: its own result follows through the gate.
 */
function undoNote(
  older: string,
  outcome: CompensationDecision['type'] | 'refused' | undefined,
): string | undefined {
  switch (outcome) {
    case 'owed':
      return `The earlier request ${older} will be undone shortly; do not say it is undone yet.`;
    case 'failed':
    case 'refused':
      return `The earlier request ${older} could not be undone: it still stands. Tell the caller, and that a person will follow up.`;
    default:
      return undefined;
  }
}

/** A read that finished: its result (or failure) is the tool's output. */
function answersInline(op: Operation | undefined): op is Operation {
  return op?.state === 'COMMITTED' || op?.state === 'FAILED_FINAL' || op?.state === 'CANCELLED';
}

/**
 * An operation id the model gave, where "latest" means the call's most recent business action
 * (the call owns its reads too, but "latest" never means a lookup).
 */
function resolveOperation(
  session: AgentSession,
  given: unknown,
  isRead: (action: string) => boolean,
): string {
  const id = String(given);
  if (id !== 'latest') return id;
  return (
    [...session.operations.values()].filter((op) => !isRead(op.action)).at(-1)?.operationId ?? id
  );
}

export function toolError(error: unknown): ToolOutput {
  if (error instanceof CallgateError)
    return { status: 'error', error: error.code, message: error.message };
  return {
    status: 'error',
    error: 'internal',
    message: 'Something went wrong; apologise and offer a person.',
  };
}
