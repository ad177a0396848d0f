/**
 * Pure translation of a system of record's HTTP answer into the provider contract. No I/O here:
 * the same rules apply to every HTTP adapter and are tested as tables.
 *
 *   execute: 2xx readable -> ok; 2xx unreadable -> outcome unknown (it may have committed);
 *            409 / 423 / 429 / 5xx -> retryable failure; other 4xx -> final failure
 *   lookup:  404 -> not_found; 200 with a status -> that status; anything else -> unknown
 *   cancel:  cancelled / already_committed / pending / 501, 405 -> not_supported;
 *            anything else -> outcome unknown (ask lookup)
 */
import { CallgateError } from '../../config/errors.ts';
import { ProviderOutcomeUnknownError, type CancelResult, type LookupResult, type ProviderResult } from './provider.ts';
import type { ProviderHttpResponse } from './provider-http-client.ts';

/** Statuses that mean "not now" rather than "no": conflict with a request in progress, locked, rate limited. */
const RETRYABLE_CLIENT_STATUSES: ReadonlySet<number> = new Set([408, 409, 423, 425, 429]);

type JsonObject = Readonly<Record<string, unknown>>;

export function executeAnswer(provider: string, response: ProviderHttpResponse): ProviderResult {
  const { status } = response;
  const body = parseObject(response.text);
  if (status >= 200 && status < 300) {
    if (body === undefined) throw unreadable(provider, `status ${status} with a body that is not a JSON object`);
    const result = isObject(body.result) ? body.result : body;
    const providerRef = firstString(body.provider_ref, body.providerRef, body.id);
    return providerRef === undefined ? { status: 'ok', result } : { status: 'ok', result, providerRef };
  }
  const error = errorOf(body);
  if (status >= 500 || RETRYABLE_CLIENT_STATUSES.has(status)) {
    return {
      status: 'failed',
      retryable: true,
      code: error.code ?? 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
      message: error.message ?? new CallgateError('CALLGATE_ERR_PROVIDER_UNAVAILABLE', { provider, status }).message,
    };
  }
  if (status >= 400) {
    return {
      status: 'failed',
      retryable: false,
      code: error.code ?? 'CALLGATE_ERR_PROVIDER_REJECTED',
      message: error.message ?? new CallgateError('CALLGATE_ERR_PROVIDER_REJECTED', { provider, reason: `status ${status}` }).message,
    };
  }
  // 1xx/3xx: nothing was processed, and following redirects with a mutation is not ours to do.
  return {
    status: 'failed',
    retryable: false,
    code: 'CALLGATE_ERR_PROVIDER_BAD_RESPONSE',
    message: new CallgateError('CALLGATE_ERR_PROVIDER_BAD_RESPONSE', { provider, reason: `unexpected status ${status}` }).message,
  };
}

export function lookupAnswer(response: ProviderHttpResponse): LookupResult {
  const { status } = response;
  const body = parseObject(response.text);
  if (status === 404) return { status: 'not_found' };
  if (status < 200 || status >= 300) return { status: 'unknown', reason: `lookup answered status ${status}` };
  if (body === undefined) return { status: 'unknown', reason: 'lookup answer is not a JSON object' };
  switch (body.status) {
    case 'committed': {
      const result = isObject(body.result) ? body.result : {};
      const providerRef = firstString(body.provider_ref, body.providerRef);
      return providerRef === undefined ? { status: 'committed', result } : { status: 'committed', result, providerRef };
    }
    case 'failed': {
      const error = errorOf(body);
      return { status: 'failed', code: error.code ?? 'failed', message: error.message ?? 'the provider recorded a failure' };
    }
    case 'cancelled':
      return { status: 'cancelled' };
    case 'not_found':
      return { status: 'not_found' };
    case 'processing':
    case 'pending':
      return { status: 'unknown', reason: 'the provider is still processing the request' };
    default:
      return { status: 'unknown', reason: `lookup answered an unknown status ${String(body.status)}` };
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
  throw unreadable(provider, `cancel answered status ${status}${body === undefined ? ' with an unreadable body' : ''}`);
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
  if (isObject(nested)) return { code: firstString(nested.code), message: firstString(nested.message) };
  return { code: firstString(body.code), message: firstString(nested, body.message) };
}

function unreadable(provider: string, reason: string): ProviderOutcomeUnknownError {
  return new ProviderOutcomeUnknownError(reason, { cause: new CallgateError('CALLGATE_ERR_PROVIDER_BAD_RESPONSE', { provider, reason }) });
}
