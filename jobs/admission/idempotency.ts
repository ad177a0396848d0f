/**
 * Idempotency keys and parameter hashes (pure). A key names one human intent: the tenant, the
 * action, the conversation it came from and either the declared intent (a goal such as "booking
 * for tonight") or the normalized arguments. The model's call id is never part of it: the model
 * may ask twice for the same thing with two call ids, and that is still one booking.
 */
import { createHash } from 'node:crypto';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * Canonical form of tool arguments: keys sorted, strings NFC-normalized with surrounding and
 * repeated white space folded, `undefined` members dropped, -0 as 0. Case is kept: order numbers
 * and names can be case-sensitive at the system of record.
 */
export function normalizeArguments(value: unknown): JsonValue {
  if (value === null) return null;
  switch (typeof value) {
    case 'string':
      return value.normalize('NFC').trim().replace(/\s+/g, ' ');
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('arguments must not contain NaN or Infinity');
      return Object.is(value, -0) ? 0 : value;
    case 'boolean':
      return value;
    case 'object': {
      if (Array.isArray(value)) return value.map((item) => normalizeArguments(item));
      const out: { [key: string]: JsonValue } = {};
      for (const key of Object.keys(value).sort()) {
        const item = (value as Record<string, unknown>)[key];
        if (item !== undefined) out[key] = normalizeArguments(item);
      }
      return out;
    }
    default:
      throw new TypeError(`arguments must be JSON (found ${typeof value})`);
  }
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(normalizeArguments(value));
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Hash of the normalized arguments: same key with another hash is a conflict. */
export function paramsHash(args: unknown): string {
  return paramsHashOf(canonicalJson(args));
}

/** The same, from arguments already in canonical form (admission computes it once). */
export function paramsHashOf(canonical: string): string {
  return sha256(canonical);
}

export interface IntentScope {
  readonly tenantId: string;
  readonly action: string;
  /** The conversation the request belongs to (the call's session id). */
  readonly sessionId: string;
  /** A declared intent; when set it replaces the arguments in the key, so changed arguments conflict. */
  readonly intent?: string;
}

export function deriveIdempotencyKey(scope: IntentScope, args: unknown): string {
  return deriveIdempotencyKeyOf(scope, scope.intent !== undefined ? '' : canonicalJson(args));
}

/** The same, from arguments already in canonical form. */
export function deriveIdempotencyKeyOf(scope: IntentScope, canonicalArgs: string): string {
  const what = scope.intent !== undefined ? `intent:${normalizeArguments(scope.intent) as string}` : `args:${canonicalArgs}`;
  return `idk_${sha256([scope.tenantId, scope.action, scope.sessionId, what].join('\u0000')).slice(0, 40)}`;
}

/** Identical reads of a tenant share one operation while it runs, whoever asked. */
export function deriveCoalesceKey(tenantId: string, action: string, args: unknown): string {
  return deriveCoalesceKeyOf(tenantId, action, canonicalJson(args));
}

export function deriveCoalesceKeyOf(tenantId: string, action: string, canonicalArgs: string): string {
  return `co_${sha256([tenantId, action, canonicalArgs].join('\u0000')).slice(0, 40)}`;
}
