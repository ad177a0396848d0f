/**
 * A system of record reached over HTTP, by a small convention (docs/http-provider.md):
 *
 *   POST {baseUrl}/{operation}                 JSON params
 *   GET  {baseUrl}/operations/{operationId}    lookup for reconciliation
 *   POST {baseUrl}/operations/{operationId}/cancel   when supportsCancel
 *   POST {baseUrl}/operations/{operationId}/void     when supportsVoid: JSON
 *        { attempt_tokens: [...] }; the system of record refuses any later request whose
 *        X-Callgate-Attempt-Token is one of them, and answers { status: voided | committed |
 *        processing } (committed with the result when one of them took effect)
 *
 * Every request of an operation (execute, lookup, cancel, void) carries Idempotency-Key,
 * X-Callgate-Operation-Id, X-Callgate-Tenant-Id, and the call it was asked for in:
 * X-Callgate-Caller, X-Callgate-Caller-Verified (true | false), X-Callgate-Called,
 * X-Callgate-Session-Id, each left out when unknown or not plausible (./call-headers.ts), so the
 * system of record can authorize by caller. Every execute also carries X-Callgate-Attempt-Token,
 * the attempt's random fence token.
 *
 * Answers are classified by ./provider-answer.ts, transport failures by ./provider-http-client.ts.
 * Lookup never throws: a provider that cannot be asked "cannot say now" (status unknown).
 */
import { counter, histogram, SLOW_SECONDS_BUCKETS } from '../../config/metrics.ts';
import { callHeaders } from './call-headers.ts';
import { cancelAnswer, executeAnswer, lookupAnswer, voidAnswer } from './provider-answer.ts';
import { ProviderHttpClient } from './provider-http-client.ts';
import {
  ProviderOutcomeUnknownError,
  ProviderUnreachableError,
  type CancelResult,
  type LookupResult,
  type Provider,
  type ProviderRequest,
  type ProviderResult,
  type VoidResult,
} from './provider.ts';

export interface HttpProviderOptions {
  readonly name: string;
  readonly baseUrl: string;
  readonly honoursIdempotencyKeys: boolean;
  readonly supportsCancel: boolean;
  /** False for a system of record that cannot be asked what happened (UNKNOWN then stays UNKNOWN). */
  readonly supportsLookup?: boolean;
  /** True when POST {baseUrl}/operations/{id}/void answers (see the convention above). */
  readonly supportsVoid?: boolean;
  readonly timeoutMs: number;
  /** Bearer token, already read from the environment by the caller. */
  readonly token?: string;
}

export type ProviderCall = 'execute' | 'lookup' | 'cancel' | 'void';

const providerRequests = counter<'provider' | 'call' | 'outcome'>({
  name: 'callgate_provider_requests_total',
  help: 'Requests to systems of record by provider, call (execute, lookup, cancel, void) and classified outcome',
  labelNames: ['provider', 'call', 'outcome'],
});

const providerSeconds = histogram<'provider' | 'call'>({
  name: 'callgate_provider_request_seconds',
  help: 'Time from sending a request to a system of record to its classified outcome',
  labelNames: ['provider', 'call'],
  buckets: SLOW_SECONDS_BUCKETS,
});

export const OPERATION_ID_HEADER = 'X-Callgate-Operation-Id';
const TENANT_ID_HEADER = 'X-Callgate-Tenant-Id';
const ATTEMPT_TOKEN_HEADER = 'X-Callgate-Attempt-Token';

export class HttpProvider implements Provider {
  readonly name: string;
  readonly honoursIdempotencyKeys: boolean;
  readonly supportsCancel: boolean;
  readonly supportsLookup: boolean;
  readonly supportsVoid: boolean;
  readonly timeoutMs: number;
  protected readonly client: ProviderHttpClient;

  constructor(options: HttpProviderOptions) {
    this.name = options.name;
    this.honoursIdempotencyKeys = options.honoursIdempotencyKeys;
    this.supportsCancel = options.supportsCancel;
    this.supportsLookup = options.supportsLookup ?? true;
    this.supportsVoid = options.supportsVoid ?? false;
    this.timeoutMs = options.timeoutMs;
    this.client = new ProviderHttpClient({
      provider: options.name,
      baseUrl: options.baseUrl,
      timeoutMs: options.timeoutMs,
      ...(options.token === undefined ? {} : { token: options.token }),
    });
  }

  async execute(request: ProviderRequest): Promise<ProviderResult> {
    return this.measure(
      'execute',
      async () => {
        const response = await this.client.send({
          method: 'POST',
          path: encodeURIComponent(request.operation),
          headers:
            request.attemptToken === undefined
              ? this.headers(request)
              : { ...this.headers(request), [ATTEMPT_TOKEN_HEADER]: request.attemptToken },
          body: request.params,
          signal: request.signal,
        });
        return executeAnswer(this.name, response);
      },
      executeOutcome,
    );
  }

  async lookup(request: Omit<ProviderRequest, 'params'>): Promise<LookupResult> {
    return this.lookupAt(`operations/${encodeURIComponent(request.operationId)}`, request);
  }

  /** One lookup GET at `path`: the provider's answer, or unknown when the provider could not be asked. */
  protected async lookupAt(
    path: string,
    request: Omit<ProviderRequest, 'params'>,
  ): Promise<LookupResult> {
    return this.measure(
      'lookup',
      async () => {
        try {
          const response = await this.client.send({
            method: 'GET',
            path,
            headers: this.headers(request),
            signal: request.signal,
          });
          return lookupAnswer(response);
        } catch (error) {
          if (
            error instanceof ProviderOutcomeUnknownError ||
            error instanceof ProviderUnreachableError
          ) {
            return { status: 'unknown', reason: error.message };
          }
          throw error;
        }
      },
      (result) => result.status,
    );
  }

  /**
   * Asks the provider to stop a request in progress. Throws ProviderUnreachableError when the
   * cancel certainly did not arrive and ProviderOutcomeUnknownError when its effect is unknown;
   * either way the operation is not cancelled until lookup or a later cancel says so.
   */
  async cancel(request: Omit<ProviderRequest, 'params'>): Promise<CancelResult> {
    if (!this.supportsCancel) return { status: 'not_supported' };
    return this.measure(
      'cancel',
      async () => {
        const response = await this.client.send({
          method: 'POST',
          path: `operations/${encodeURIComponent(request.operationId)}/cancel`,
          headers: this.headers(request),
          body: {},
          signal: request.signal,
        });
        return cancelAnswer(this.name, response);
      },
      (result) => result.status,
    );
  }

  /** Voids attempts by their tokens. Never throws: a void that could not be asked is unknown. */
  async voidAttempts(
    request: Omit<ProviderRequest, 'params'> & { readonly attemptTokens: readonly string[] },
  ): Promise<VoidResult> {
    if (!this.supportsVoid)
      return { status: 'unknown', reason: 'the provider does not void attempts' };
    return this.measure(
      'void',
      async () => {
        try {
          const response = await this.client.send({
            method: 'POST',
            path: `operations/${encodeURIComponent(request.operationId)}/void`,
            headers: this.headers(request),
            body: { attempt_tokens: request.attemptTokens },
            signal: request.signal,
          });
          return voidAnswer(response);
        } catch (error) {
          if (
            error instanceof ProviderOutcomeUnknownError ||
            error instanceof ProviderUnreachableError
          )
            return { status: 'unknown', reason: error.message };
          throw error;
        }
      },
      (result) => result.status,
    );
  }

  async close(): Promise<void> {
    this.client.close();
  }

  protected headers(request: Omit<ProviderRequest, 'params'>): Record<string, string> {
    return {
      'idempotency-key': request.idempotencyKey,
      [OPERATION_ID_HEADER]: request.operationId,
      [TENANT_ID_HEADER]: request.tenantId,
      ...callHeaders(request.call),
    };
  }

  private async measure<T>(
    call: ProviderCall,
    run: () => Promise<T>,
    outcomeOf: (value: T) => string,
  ): Promise<T> {
    const started = process.hrtime.bigint();
    let outcome = 'error';
    try {
      const value = await run();
      outcome = outcomeOf(value);
      return value;
    } catch (error) {
      if (error instanceof ProviderOutcomeUnknownError) outcome = 'outcome_unknown';
      else if (error instanceof ProviderUnreachableError) outcome = 'unreachable';
      throw error;
    } finally {
      providerRequests.inc({ provider: this.name, call, outcome });
      providerSeconds.observe(
        { provider: this.name, call },
        Number(process.hrtime.bigint() - started) / 1e9,
      );
    }
  }
}

function executeOutcome(result: ProviderResult): string {
  if (result.status === 'ok') return 'ok';
  return result.retryable ? 'failed_retryable' : 'failed_final';
}
