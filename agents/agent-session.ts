/**
 * The agent side of one call: who is speaking for the line, which operations the call owns (they
 * belong to the call, not to the agent that started them), what each was for, what the caller has
 * been told, and what the conversation is doing right now. The gate reads snapshots of it.
 */
import type { ConversationScope } from '../jobs/ledger/operation.ts';
import type { AgentCatalogue } from './agent.ts';
import type { SessionSnapshot } from './relevance-gate.ts';

/** Whether the caller is still on this call, as the gate sees it (the call's own lifecycle is gateway/call/call-phase.ts). */
export type CallPresence = 'active' | 'hung_up' | 'transferred';

export interface OwnedOperation {
  readonly operationId: string;
  readonly action: string;
  readonly tool: string;
  /** The agent that asked for it. */
  readonly agent: string;
  readonly goal?: string;
  /** The model's function call, while its output is still owed. */
  openCallId?: string;
  /** The caller has been told the final result. */
  told: boolean;
}

export interface AgentSessionOptions {
  readonly sessionId: string;
  readonly tenantId: string;
  /** Who called: the From user, or the asserted identity of a trusted trunk. */
  readonly caller?: string;
  /** True only when a trunk the tenant trusts asserted the caller (gateway/sip/caller-identity.ts). */
  readonly callerVerified?: boolean;
  /** The number dialled (the tenant's number the call came in on). */
  readonly called?: string;
  readonly ownerGateway: string;
  readonly agent: string;
  /** The agents this call runs with to its end (a reload changes them for later calls only). */
  readonly catalogue?: AgentCatalogue;
  /** Their release (agents/agent-versions.ts), recorded on every operation the call starts. */
  readonly agentVersion?: string;
  /** Whether the caller holds the call now; the call answers it from its phase. */
  readonly callerOnHold?: () => boolean;
  /** Whether the model is running a response now; the call asks its model session. */
  readonly responseActive?: () => boolean;
}

/**
 * What is known of the call a plugin acts for: who called, whether a trusted trunk vouched for
 * that, the number dialled, the tenant and the session (named as templates name them:
 * `{call.caller}`, `{call.tenant}`).
 */
export interface CallFacts {
  readonly caller?: string;
  readonly callerVerified: boolean;
  readonly called?: string;
  readonly tenant: string;
  readonly session: string;
}

export class AgentSession {
  readonly sessionId: string;
  readonly tenantId: string;
  readonly caller?: string;
  readonly callerVerified: boolean;
  readonly called?: string;
  readonly ownerGateway: string;
  readonly catalogue?: AgentCatalogue;
  readonly agentVersion?: string;
  activeAgent: string;
  phase: CallPresence = 'active';
  callerSpeaking = false;
  /** When the caller last resumed a held call (ms since epoch): commit-to-audible counts from here, not from a commit in the hold. */
  resumedAt: number | undefined;
  turnId = 0;
  /** Tools running right now (for the per-call limit). */
  toolsInFlight = 0;
  readonly operations = new Map<string, OwnedOperation>();
  /** Reads whose result a tool is waiting for, to answer inside its output: not to be spoken meanwhile. */
  readonly answeringInline = new Set<string>();
  /** Goal -> the latest operation for it. */
  private readonly goals = new Map<string, string>();
  /** Times of recent mutations, for frequency limits. */
  readonly mutationTimes: number[] = [];
  readonly abort = new AbortController();
  private readonly holdProbe: () => boolean;
  private readonly responseProbe: () => boolean;

  constructor(options: AgentSessionOptions) {
    this.holdProbe = options.callerOnHold ?? (() => false);
    this.responseProbe = options.responseActive ?? (() => false);
    this.sessionId = options.sessionId;
    this.tenantId = options.tenantId;
    this.caller = options.caller;
    this.callerVerified = options.callerVerified ?? false;
    this.called = options.called;
    this.ownerGateway = options.ownerGateway;
    this.activeAgent = options.agent;
    this.catalogue = options.catalogue;
    this.agentVersion = options.agentVersion;
  }

  /** What plugins may know of the call. */
  get call(): CallFacts {
    return {
      caller: this.caller,
      callerVerified: this.callerVerified,
      called: this.called,
      tenant: this.tenantId,
      session: this.sessionId,
    };
  }

  /** The call facts every operation of this call records (jobs/ledger/operation.ts). */
  get operationScope(): Pick<
    ConversationScope,
    'sessionId' | 'ownerGateway' | 'caller' | 'callerVerified' | 'called' | 'agentVersion'
  > {
    return {
      sessionId: this.sessionId,
      ownerGateway: this.ownerGateway,
      caller: this.caller,
      callerVerified: this.callerVerified,
      called: this.called,
      ...(this.agentVersion !== undefined && { agentVersion: this.agentVersion }),
    };
  }

  /** The caller holds the call: nothing sent reaches them (read from the call's phase). */
  get callerOnHold(): boolean {
    return this.holdProbe();
  }

  /** The model is speaking (read from the call's model session, the one place that knows). */
  get responseActive(): boolean {
    return this.responseProbe();
  }

  /** Records an operation the call now owns; returns the operation it supersedes, if any. */
  own(op: Omit<OwnedOperation, 'told'>): OwnedOperation | undefined {
    const existing = this.operations.get(op.operationId);
    if (existing) {
      existing.openCallId = op.openCallId ?? existing.openCallId;
      return undefined;
    }
    this.operations.set(op.operationId, { ...op, told: false });
    if (op.goal === undefined) return undefined;
    const previous = this.goals.get(op.goal);
    this.goals.set(op.goal, op.operationId);
    return previous === undefined || previous === op.operationId
      ? undefined
      : this.operations.get(previous);
  }

  isSuperseded(operationId: string): boolean {
    const owned = this.operations.get(operationId);
    if (owned?.goal === undefined) return false;
    return this.goals.get(owned.goal) !== operationId;
  }

  snapshot(
    operationId: string,
    mayReveal: (agent: string, action: string) => boolean,
  ): SessionSnapshot {
    const owned = this.operations.get(operationId);
    return {
      call: this.phase,
      activeAgent: this.activeAgent,
      activeAgentMayReveal: owned ? mayReveal(this.activeAgent, owned.action) : false,
      callerSpeaking: this.callerSpeaking,
      callerOnHold: this.callerOnHold,
      responseActive: this.responseActive,
      alreadyTold: owned?.told ?? false,
      superseded: this.isSuperseded(operationId),
    };
  }

  /** What a new agent (after a handoff) or a re-opened model session needs to know. */
  pendingSummary(states: ReadonlyMap<string, string>): string {
    const lines = [...this.operations.values()]
      .filter((op) => !op.told)
      .map(
        (op) =>
          `- ${op.tool} (${op.operationId})${op.goal ? ` for ${op.goal}` : ''}: ${states.get(op.operationId) ?? 'unknown state'}`,
      );
    return lines.length === 0
      ? 'No operations are pending in this call.'
      : `Operations of this call not yet told to the caller:\n${lines.join('\n')}`;
  }
}
