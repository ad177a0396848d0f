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

export interface ProviderRequest {
  /** Our operation id: the provider records it as its reference, so `lookup` can find it. */
  readonly operationId: string;
  readonly idempotencyKey: string;
  readonly tenantId: string;
  /** The operation name at the provider (`book`, `cancel`, `refund`, `availability`, ...). */
  readonly operation: string;
  readonly params: Readonly<Record<string, unknown>>;
  /** Aborted when the job's deadline passes or the worker shuts down. */
  readonly signal: AbortSignal;
}

export type ProviderResult =
  | { readonly status: 'ok'; readonly result: Readonly<Record<string, unknown>>; readonly providerRef?: string }
  | { readonly status: 'failed'; readonly retryable: boolean; readonly code: string; readonly message: string };

export type LookupResult =
  /** The provider committed the effect; `result` is what it recorded. */
  | { readonly status: 'committed'; readonly result: Readonly<Record<string, unknown>>; readonly providerRef?: string }
  /** The provider has no record of it: the request never took effect. */
  | { readonly status: 'not_found' }
  /** The provider recorded a definite failure. */
  | { readonly status: 'failed'; readonly code: string; readonly message: string }
  /** A cancel we asked for took effect before the commit: nothing happened and nothing will. */
  | { readonly status: 'cancelled' }
  /** The provider cannot say now (down, still processing): ask again later. */
  | { readonly status: 'unknown'; readonly reason: string };

export type CancelResult =
  | { readonly status: 'cancelled' }
  /** Too late: the effect is committed (the caller then needs compensation). */
  | { readonly status: 'already_committed'; readonly result: Readonly<Record<string, unknown>> }
  /** The provider accepted the request but has not confirmed; ask lookup later. */
  | { readonly status: 'pending' }
  | { readonly status: 'not_supported' };

export interface Provider {
  readonly name: string;
  /** True when a repeated request with the same Idempotency-Key has no second effect. */
  readonly honoursIdempotencyKeys: boolean;
  readonly supportsCancel: boolean;
  readonly supportsLookup: boolean;
  execute(request: ProviderRequest): Promise<ProviderResult>;
  /** Asks the provider what happened to `operationId`; required for reconciliation. */
  lookup?(request: Omit<ProviderRequest, 'params'>): Promise<LookupResult>;
  cancel?(request: Omit<ProviderRequest, 'params'>): Promise<CancelResult>;
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
