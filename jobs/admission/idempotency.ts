/**
 * Idempotency keys and parameter hashes (pure). A key names one human intent: the tenant, the
 * action, the conversation it came from and the normalized values of the action's intent fields
 * (refund: order and amount). Free text and control flags (a reworded `reason`, `confirmed: true`
 * added once the caller said yes) are not intent fields, so they never make a second operation.
 * The model's call id is never part of it: the model may ask twice for the same thing with two
 * call ids, and that is still one booking. An action that declares no intent fields is keyed by
 * all its arguments. Pinned by test/unit/jobs/intent-keys.test.ts.
 */
import { createHash } from 'node:crypto';

export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

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
      if (!Number.isFinite(value))
        throw new TypeError('arguments must not contain NaN or Infinity');
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

/**
 * Hash of the normalized arguments (or of the canonical intent, `intentOf`): same key with another
 * hash is a conflict.
 */
export function paramsHash(args: unknown): string {
  return paramsHashOf(canonicalJson(args));
}

/** The same, from a canonical form computed already (admission computes it once). */
export function paramsHashOf(canonical: string): string {
  return sha256(canonical);
}

export interface IntentScope {
  readonly tenantId: string;
  readonly action: string;
  /** The conversation the request belongs to (the call's session id). */
  readonly sessionId: string;
}

/**
 * Which arguments make two requests the same intent: the named fields, or all of them. A field
 * missing from the arguments counts as null, so leaving an optional intent field out and sending
 * it as null are one intent.
 */
export type IntentFields = readonly string[] | 'all';

/**
 * The part of the arguments the key and the conflict check look at, in canonical form: the intent
 * fields only (keys sorted, strings folded as in `normalizeArguments`), or all the arguments.
 */
export function intentOf(fields: IntentFields, args: Readonly<Record<string, unknown>>): string {
  if (fields === 'all') return canonicalJson(args);
  const picked: Record<string, unknown> = {};
  for (const field of fields)
    picked[field] = Object.hasOwn(args, field) ? (args[field] ?? null) : null;
  return canonicalJson(picked);
}

export function deriveIdempotencyKey(
  scope: IntentScope,
  args: Readonly<Record<string, unknown>>,
  fields: IntentFields = 'all',
): string {
  return deriveIdempotencyKeyOf(scope, fields, intentOf(fields, args));
}

/**
 * The same, from the canonical intent (`intentOf`). Keys of actions keyed by all arguments are the
 * ones earlier versions derived, so requests repeated across an upgrade still find their operation.
 */
export function deriveIdempotencyKeyOf(
  scope: IntentScope,
  fields: IntentFields,
  canonicalIntent: string,
): string {
  const what = fields === 'all' ? `args:${canonicalIntent}` : `fields:${canonicalIntent}`;
  return `idk_${sha256([scope.tenantId, scope.action, scope.sessionId, what].join('\u0000')).slice(0, 40)}`;
}

/** Identical reads of a tenant share one operation while it runs, whoever asked. */
export function deriveCoalesceKey(tenantId: string, action: string, args: unknown): string {
  return deriveCoalesceKeyOf(tenantId, action, canonicalJson(args));
}

export function deriveCoalesceKeyOf(
  tenantId: string,
  action: string,
  canonicalArgs: string,
): string {
  return `co_${sha256([tenantId, action, canonicalArgs].join('\u0000')).slice(0, 40)}`;
}
