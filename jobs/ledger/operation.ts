/**
 * The operation: one business intent the model asked for and the application admitted, with the
 * state machine that only Lua compare-and-set scripts move (see jobs/ledger/lua/).
 *
 *   REQUESTED --validate+authorize--> ADMITTED --persist, enqueue--> RUNNING
 *   RUNNING --> COMMITTED | FAILED_RETRYABLE | FAILED_FINAL | UNKNOWN
 *   FAILED_RETRYABLE --backoff, within budget and deadline--> RUNNING
 *   FAILED_RETRYABLE --no retry left, and an earlier attempt's outcome is unknown--> UNKNOWN
 *   UNKNOWN --reconcile--> COMMITTED | FAILED_FINAL | UNKNOWN
 *   UNKNOWN --reconcile: the provider has no record, after the grace period--> FAILED_RETRYABLE
 *   UNKNOWN --reconcile: the provider confirms it cancelled the request--> CANCELLED
 *   ADMITTED --cancel before start, or admission deadline passed--> CANCELLED
 *   RUNNING --provider-confirmed cancel--> CANCELLED
 *   COMMITTED is final: undoing it is a new (compensation) operation linked to it.
 */

export const OPERATION_STATES = [
  'REQUESTED',
  'ADMITTED',
  'RUNNING',
  'COMMITTED',
  'FAILED_RETRYABLE',
  'FAILED_FINAL',
  'UNKNOWN',
  'CANCELLED',
] as const;

export type OperationState = (typeof OPERATION_STATES)[number];

/** States after which nothing more happens to the operation. */
export const TERMINAL_STATES: ReadonlySet<OperationState> = new Set([
  'COMMITTED',
  'FAILED_FINAL',
  'CANCELLED',
]);

/**
 * Legal transitions. The Lua scripts carry the same table (lua/transitions.lua is generated from
 * this one at load time), so the TypeScript and Redis views cannot drift apart.
 */
export const LEGAL_TRANSITIONS: Readonly<Record<OperationState, readonly OperationState[]>> = {
  REQUESTED: ['ADMITTED'],
  ADMITTED: ['RUNNING', 'CANCELLED'],
  RUNNING: ['COMMITTED', 'FAILED_RETRYABLE', 'FAILED_FINAL', 'UNKNOWN', 'CANCELLED'],
  FAILED_RETRYABLE: ['RUNNING', 'FAILED_FINAL', 'CANCELLED', 'UNKNOWN'],
  UNKNOWN: ['COMMITTED', 'FAILED_FINAL', 'UNKNOWN', 'FAILED_RETRYABLE', 'CANCELLED'],
  COMMITTED: [],
  FAILED_FINAL: [],
  CANCELLED: [],
};

export function isLegalTransition(from: OperationState, to: OperationState): boolean {
  return LEGAL_TRANSITIONS[from].includes(to);
}

/**
 * The correlation fields every log line about an operation carries: the operation, its key, and
 * the conversation that asked for it (session, turn, model response, the model's call id).
 */
export function operationLogFields(
  op: Pick<Operation, 'operationId' | 'idempotencyKey' | 'tenantId' | 'action' | 'scope'>,
): Record<string, string | undefined> {
  return {
    operation_id: op.operationId,
    idempotency_key: op.idempotencyKey,
    tenant_id: op.tenantId,
    action: op.action,
    session_id: op.scope.sessionId,
    turn_id: op.scope.turnId,
    response_id: op.scope.responseId,
    provider_call_id: op.scope.providerCallId,
  };
}

export function isTerminal(state: OperationState): boolean {
  return TERMINAL_STATES.has(state);
}

export type ActionKind = 'read' | 'mutation';

/** Who moved an operation: the audit trail names the part of the system that did it. */
export type Actor =
  'admission' | 'worker' | 'reconciler' | 'canceller' | 'sweeper' | 'operator' | 'gateway';

export interface HistoryEntry {
  readonly state: OperationState;
  readonly at: number;
  readonly attempt: number;
  readonly actor: Actor;
  readonly reason: string;
}

/** How and when a result reached (or did not reach) the caller; written by the gateway. */
export interface DeliveryRecord {
  readonly decision: string;
  readonly reasons: readonly string[];
  readonly at: number;
  readonly agent?: string;
  readonly responseId?: string;
  readonly channel?: 'voice' | 'out_of_band' | 'none';
  /**
   * The caller has the result (a spoken response finished). Out of band it stays false: the
   * receivers' answers are the operation's `outOfBand` records, written by the worker.
   */
  readonly delivered?: boolean;
  /** The out-of-band message was queued on at least one channel (see `Operation.outOfBand`). */
  readonly queued?: boolean;
  /** Milliseconds from the commit to the first audio of the spoken acknowledgement. */
  readonly commitToAudibleMs?: number;
}

/** The channels an out-of-band message goes out on, each delivered and retried on its own. */
export const OUT_OF_BAND_CHANNELS = ['webhook', 'sms'] as const;
export type OutOfBandChannel = (typeof OUT_OF_BAND_CHANNELS)[number];

/**
 * Where one channel's message stands (field `oob:<channel>`): queued by the gateway, then written
 * by the worker: delivered when the receiver answered 2xx, failed while retries remain, gave_up
 * when they ran out (re-drivable: queued again, `redrives` counts how often).
 */
export interface OutOfBandRecord {
  readonly state: 'queued' | 'delivered' | 'failed' | 'gave_up';
  /** Sends tried since it was last queued. */
  readonly attempts: number;
  /** When the state was written (Redis time, ms). */
  readonly at: number;
  readonly error?: string;
  /** Times it was queued again after giving up. */
  readonly redrives: number;
  /** When it was first queued (Redis time, ms): the automatic re-drive stops a day after it. */
  readonly since: number;
}

export interface OperationError {
  readonly code: string;
  readonly message: string;
}

/** Where in the conversation the operation came from. */
export interface ConversationScope {
  readonly sessionId: string;
  /** Who called (a number or SIP user); see `callerVerified`. */
  readonly caller?: string;
  /** True only when a trunk the tenant trusts asserted the caller (P-Asserted-Identity). */
  readonly callerVerified?: boolean;
  /** The number dialled. */
  readonly called?: string;
  readonly agent?: string;
  /** The agents release the call ran under (agents/agent-versions.ts): what it was told and offered. */
  readonly agentVersion?: string;
  readonly turnId?: string;
  /** The model's call id for the tool call: recorded, never used for deduplication. */
  readonly providerCallId?: string;
  readonly responseId?: string;
  /** What the caller wants this for ("booking for tonight"): a newer request for the goal supersedes. */
  readonly goal?: string;
  /** Gateway that owns the session and receives the result event. */
  readonly ownerGateway: string;
}

export interface Operation {
  readonly operationId: string;
  readonly tenantId: string;
  readonly action: string;
  readonly kind: ActionKind;
  readonly provider: string;
  readonly providerOperation: string;
  readonly idempotencyKey: string;
  readonly paramsHash: string;
  readonly params: Readonly<Record<string, unknown>>;
  readonly scope: ConversationScope;
  readonly state: OperationState;
  readonly attempt: number;
  /**
   * The current attempt's fence token (random per attempt, written with the move to RUNNING): what
   * the provider request carries and what the attempt's own moves are fenced by.
   */
  readonly attemptToken?: string;
  /** Every attempt's token, oldest first: what a provider is asked to void before a resend. */
  readonly attemptTokens: readonly string[];
  /**
   * Attempts that may have reached the provider: what the retry policy counts. An attempt refused
   * before its request left (its sending mark not durable, its lease expired) is not among them.
   */
  readonly sentAttempts: number;
  /** Set once the request to a provider may have left this process (UNKNOWN becomes possible). */
  readonly sending: boolean;
  /**
   * Some attempt's outcome is unknown (a lost answer, a worker lost while sending): the effect may
   * exist even if later attempts failed, so giving up must ask the provider (UNKNOWN), not claim failure.
   */
  readonly uncertain: boolean;
  readonly providerIdempotent: boolean;
  readonly money: boolean;
  readonly createdAt: number;
  readonly admittedAt?: number;
  readonly startedAt?: number;
  readonly sendingAt?: number;
  readonly committedAt?: number;
  readonly finishedAt?: number;
  readonly reconciledAt?: number;
  readonly admissionDeadlineAt: number;
  readonly deadlineAt: number;
  readonly result?: Readonly<Record<string, unknown>>;
  readonly error?: OperationError;
  readonly providerRef?: string;
  readonly compensates?: string;
  readonly compensatedBy?: string;
  readonly cancelRequested: boolean;
  readonly delivery?: DeliveryRecord;
  /** Out-of-band messages by channel, when the result went out of band. */
  readonly outOfBand?: Readonly<Partial<Record<OutOfBandChannel, OutOfBandRecord>>>;
  /** For shared reads: identical concurrent requests find the running operation by this key. */
  readonly coalesceKey?: string;
}
