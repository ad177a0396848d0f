/**
 * A system of record as the worker sees it. Adapters translate these calls to a real API; the
 * worker never talks HTTP itself. What an adapter reports decides the operation's next state:
 *
 *   ok                                   -> COMMITTED
 *   failure, retryable                   -> FAILED_RETRYABLE (then retried within budget/deadline)
 *   failure, final                       -> FAILED_FINAL
 *   throws ProviderOutcomeUnknownError   -> UNKNOWN when the request may have reached the provider
 *                                          and the provider does not honour idempotency keys;
 *                                          a retry (with the same key) otherwise
 */
import type { Operation } from '../ledger/operation.ts';

/**
 * The call an operation was asked for in, as admission recorded it on the operation: every request
 * of the operation carries it, so a system of record can authorize by caller without the call.
 */
export interface ProviderCallContext {
  readonly sessionId?: string;
  readonly caller?: string;
  /** True only when a trunk the tenant trusts asserted the caller. */
  readonly callerVerified?: boolean;
  readonly called?: string;
}

/** The call context of `op`, for its provider requests. */
export function callContextOf(op: Pick<Operation, 'scope'>): ProviderCallContext {
  const { sessionId, caller, callerVerified, called } = op.scope;
  return { sessionId, caller, callerVerified, called };
}

export interface ProviderRequest {
  /** Our operation id: the provider records it as its reference, so `lookup` can find it. */
  readonly operationId: string;
  readonly idempotencyKey: string;
  /**
   * The attempt's fence token (random per attempt, X-Callgate-Attempt-Token): a provider that can
   * void attempts refuses a request whose token was voided, so a request held up on its way (a slow
   * proxy, a paused worker) cannot take effect after reconciliation decided to send again.
   */
  readonly attemptToken?: string;
  readonly tenantId: string;
  /** The operation name at the provider (`book`, `cancel`, `refund`, `availability`, ...). */
  readonly operation: string;
  readonly params: Readonly<Record<string, unknown>>;
  /** Who the operation is for (X-Callgate-Caller and friends, see call-headers.ts). */
  readonly call?: ProviderCallContext;
  /** Aborted when the job's deadline passes or the worker shuts down. */
  readonly signal: AbortSignal;
}

export type ProviderResult =
  | {
      readonly status: 'ok';
      readonly result: Readonly<Record<string, unknown>>;
      readonly providerRef?: string;
    }
  | {
      readonly status: 'failed';
      readonly retryable: boolean;
      readonly code: string;
      readonly message: string;
    };

export type LookupResult =
  /** The provider committed the effect; `result` is what it recorded. */
  | {
      readonly status: 'committed';
      readonly result: Readonly<Record<string, unknown>>;
      readonly providerRef?: string;
    }
  /** The provider has no record of it: the request never took effect. */
  | { readonly status: 'not_found' }
  /** The provider recorded a definite failure. */
  | { readonly status: 'failed'; readonly code: string; readonly message: string }
  /** A cancel we asked for took effect before the commit: nothing happened and nothing will. */
  | { readonly status: 'cancelled' }
  /** The provider cannot say now (down, still processing): ask again later. */
  | { readonly status: 'unknown'; readonly reason: string; readonly processing?: true };

export type CancelResult =
  | { readonly status: 'cancelled' }
  /** Too late: the effect is committed (the caller then needs compensation). */
  | { readonly status: 'already_committed'; readonly result: Readonly<Record<string, unknown>> }
  /** The provider accepted the request but has not confirmed; ask lookup later. */
  | { readonly status: 'pending' }
  | { readonly status: 'not_supported' };

/**
 * What `voidAttempts` did. `voided`: the provider will refuse any request carrying one of the
 * tokens from now on, and none of them took effect, so a new attempt is not a second effect.
 */
export type VoidResult =
  | { readonly status: 'voided' }
  /** One of the attempts took effect before the void: the operation is committed. */
  | {
      readonly status: 'committed';
      readonly result: Readonly<Record<string, unknown>>;
      readonly providerRef?: string;
    }
  /** A request with one of the tokens is being processed now: ask again later. */
  | { readonly status: 'processing' }
  /** The provider could not be asked or did not say: nothing is known to be voided. */
  | { readonly status: 'unknown'; readonly reason: string };

export interface Provider {
  readonly name: string;
  /** True when a repeated request with the same Idempotency-Key has no second effect. */
  readonly honoursIdempotencyKeys: boolean;
  readonly supportsCancel: boolean;
  readonly supportsLookup: boolean;
  /**
   * True when the provider can void attempts (`voidAttempts`). Without it (and without idempotency
   * keys) a "not found" is never turned into a resend: a request still on its way could take effect
   * after it, so the operation stays UNKNOWN for a person (docs/runbook.md).
   */
  readonly supportsVoid: boolean;
  /** How long one request may take before the client gives up (the lease and grace bounds build on it). */
  readonly timeoutMs: number;
  execute(request: ProviderRequest): Promise<ProviderResult>;
  /** Asks the provider what happened to `operationId`; required for reconciliation. */
  lookup?(request: Omit<ProviderRequest, 'params'>): Promise<LookupResult>;
  cancel?(request: Omit<ProviderRequest, 'params'>): Promise<CancelResult>;
  /** Voids the attempts with these tokens, or reports that one took effect; required for supportsVoid. */
  voidAttempts?(
    request: Omit<ProviderRequest, 'params'> & { readonly attemptTokens: readonly string[] },
  ): Promise<VoidResult>;
  close?(): Promise<void>;
}

/**
 * The request may have reached the provider and the answer was lost (timeout after sending,
 * connection dropped mid-response, an unreadable answer). Never proof that nothing happened.
 */
export class ProviderOutcomeUnknownError extends Error {
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`the outcome at the provider is unknown: ${reason}`, options);
    this.name = 'ProviderOutcomeUnknownError';
    this.reason = reason;
  }
}

/** The request certainly did not reach the provider (connection refused, DNS): safe to retry. */
export class ProviderUnreachableError extends Error {
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`the provider was not reached: ${reason}`, options);
    this.name = 'ProviderUnreachableError';
  }
}
