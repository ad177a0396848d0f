/**
 * Pure translation of a system of record's HTTP answer into the provider contract. No I/O here:
 * the same rules apply to every HTTP adapter and are tested as tables.
 *
 *   execute: 2xx readable -> ok; 2xx unreadable -> outcome unknown (it may have committed);
 *            408 / 409 / 423 / 425 / 429 -> retryable failure; other 4xx -> final failure;
 *            5xx -> outcome unknown, except the few that say the request was not acted on
 *            (see NOT_PROCESSED_SERVER_STATUSES and refusedUnprocessed)
 *   lookup:  404 -> not_found; 200 with a status -> that status; anything else -> unknown
 *   cancel:  cancelled / already_committed / pending / 501, 405 -> not_supported;
 *            anything else -> outcome unknown (ask lookup)
 *   void:    200 voided / committed / processing; anything else -> unknown (nothing is voided)
 */
import { CallgateError } from '../../config/errors.ts';
import {
  ProviderOutcomeUnknownError,
  type CancelResult,
  type LookupResult,
  type ProviderResult,
  type VoidResult,
} from './provider.ts';
import type { ProviderHttpResponse } from './provider-http-client.ts';

/** Statuses that mean "not now" rather than "no": conflict with a request in progress, locked, rate limited. */
const RETRYABLE_CLIENT_STATUSES: ReadonlySet<number> = new Set([408, 409, 423, 425, 429]);

/**
 * 5xx statuses that say the server did not act on the request at all: it does not implement the
 * method (501) or the HTTP version (505). Every other 5xx may come after the system of record
 * committed: a 500 thrown after the write, a proxy's 502 when the backend dropped the connection
 * after its commit, a proxy's 504 when the backend answered too late. Those are an outcome unknown,
 * never a definite failure: for a provider that does not honour idempotency keys a resend could be
 * a second refund, so the operation goes to reconciliation; a provider that does is asked again
 * with the same key (the executor decides, see operation-executor.ts).
 */
const NOT_PROCESSED_SERVER_STATUSES: ReadonlySet<number> = new Set([501, 505]);

type JsonObject = Readonly<Record<string, unknown>>;

export function executeAnswer(provider: string, response: ProviderHttpResponse): ProviderResult {
  const { status } = response;
  const body = parseObject(response.text);
  if (status >= 200 && status < 300) {
    if (body === undefined)
      throw unreadable(provider, `status ${status} with a body that is not a JSON object`);
    const result = isObject(body.result) ? body.result : body;
    const providerRef = firstString(body.provider_ref, body.providerRef, body.id);
    return providerRef === undefined
      ? { status: 'ok', result }
      : { status: 'ok', result, providerRef };
  }
  const error = errorOf(body);
  if (
    status >= 500 &&
    !NOT_PROCESSED_SERVER_STATUSES.has(status) &&
    !refusedUnprocessed(status, error)
  ) {
    throw new ProviderOutcomeUnknownError(
      `answered status ${status}, possibly after acting on the request`,
      {
        cause: new CallgateError('CALLGATE_ERR_PROVIDER_UNAVAILABLE', { provider, status }),
      },
    );
  }
  if (status >= 500 || RETRYABLE_CLIENT_STATUSES.has(status)) {
    return {
      status: 'failed',
      retryable: true,
      code: error.code ?? 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
      message:
        error.message ??
        new CallgateError('CALLGATE_ERR_PROVIDER_UNAVAILABLE', { provider, status }).message,
    };
  }
  if (status >= 400) {
    return {
      status: 'failed',
      retryable: false,
      code: error.code ?? 'CALLGATE_ERR_PROVIDER_REJECTED',
      message:
        error.message ??
        new CallgateError('CALLGATE_ERR_PROVIDER_REJECTED', {
          provider,
          reason: `status ${status}`,
        }).message,
    };
  }
  // 1xx/3xx: nothing was processed, and following redirects with a mutation is not ours to do.
  return {
    status: 'failed',
    retryable: false,
    code: 'CALLGATE_ERR_PROVIDER_BAD_RESPONSE',
    message: new CallgateError('CALLGATE_ERR_PROVIDER_BAD_RESPONSE', {
      provider,
      reason: `unexpected status ${status}`,
    }).message,
  };
}

export function lookupAnswer(response: ProviderHttpResponse): LookupResult {
  const { status } = response;
  const body = parseObject(response.text);
  if (status === 404) return { status: 'not_found' };
  if (status < 200 || status >= 300)
    return { status: 'unknown', reason: `lookup answered status ${status}` };
  if (body === undefined)
    return { status: 'unknown', reason: 'lookup answer is not a JSON object' };
  switch (body.status) {
    case 'committed': {
      const result = isObject(body.result) ? body.result : {};
      const providerRef = firstString(body.provider_ref, body.providerRef);
      return providerRef === undefined
        ? { status: 'committed', result }
        : { status: 'committed', result, providerRef };
    }
    case 'failed': {
      const error = errorOf(body);
      return {
        status: 'failed',
        code: error.code ?? 'failed',
        message: error.message ?? 'the provider recorded a failure',
      };
    }
    case 'cancelled':
      return { status: 'cancelled' };
    case 'not_found':
      return { status: 'not_found' };
    case 'processing':
    case 'pending':
      return {
        status: 'unknown',
        reason: 'the provider is still processing the request',
        processing: true,
      };
    default:
      return {
        status: 'unknown',
        reason: `lookup answered an unknown status ${String(body.status)}`,
      };
  }
}

export function cancelAnswer(provider: string, response: ProviderHttpResponse): CancelResult {
  const { status } = response;
  if (status === 501 || status === 405) return { status: 'not_supported' };
  const body = parseObject(response.text);
  if (status >= 200 && status < 300 && body !== undefined) {
    switch (body.status) {
      case 'cancelled':
        return { status: 'cancelled' };
      case 'already_committed':
        return { status: 'already_committed', result: isObject(body.result) ? body.result : {} };
      case 'pending':
        return { status: 'pending' };
      case 'not_supported':
        return { status: 'not_supported' };
    }
  }
  // Whether the cancel took effect is not known: the caller asks lookup, never assumes.
  throw unreadable(
    provider,
    `cancel answered status ${status}${body === undefined ? ' with an unreadable body' : ''}`,
  );
}

/** Only an explicit `voided` counts: any other answer leaves the attempts as they were. */
export function voidAnswer(response: ProviderHttpResponse): VoidResult {
  const { status } = response;
  const body = parseObject(response.text);
  if (status < 200 || status >= 300 || body === undefined)
    return { status: 'unknown', reason: `void answered status ${status}` };
  switch (body.status) {
    case 'voided':
      return { status: 'voided' };
    case 'committed': {
      const result = isObject(body.result) ? body.result : {};
      const providerRef = firstString(body.provider_ref, body.providerRef);
      return providerRef === undefined
        ? { status: 'committed', result }
        : { status: 'committed', result, providerRef };
    }
    case 'processing':
      return { status: 'processing' };
    default:
      return {
        status: 'unknown',
        reason: `void answered an unknown status ${String(body.status)}`,
      };
  }
}

/**
 * A 503 in the system of record's own error format (`{ error: { code } }`) is the system of record
 * itself saying it is unavailable: overloaded, in maintenance, shedding load. It turned the request
 * away and did not process it, so a retry is safe. A 503 without that (a proxy's text or HTML page,
 * an empty body) is not trusted: some proxies answer 503 when the backend reset the connection after
 * reading the request (Envoy's "upstream reset before headers"), so it is treated like a 502.
 * A Retry-After header would say the same as the error format, but answers reach this module
 * without their headers (provider-http-client.ts).
 */
function refusedUnprocessed(status: number, error: { code?: string }): boolean {
  return status === 503 && error.code !== undefined;
}

function parseObject(text: string): JsonObject | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function firstString(...values: unknown[]): string | undefined {
  return values.find((v): v is string => typeof v === 'string' && v !== '');
}

/** Accepts `{ error: { code, message } }`, `{ error: "..." }` and `{ code, message }`. */
function errorOf(body: JsonObject | undefined): { code?: string; message?: string } {
  if (body === undefined) return {};
  const nested = body.error;
  if (isObject(nested))
    return { code: firstString(nested.code), message: firstString(nested.message) };
  return { code: firstString(body.code), message: firstString(nested, body.message) };
}

function unreadable(provider: string, reason: string): ProviderOutcomeUnknownError {
  return new ProviderOutcomeUnknownError(reason, {
    cause: new CallgateError('CALLGATE_ERR_PROVIDER_BAD_RESPONSE', { provider, reason }),
  });
}
