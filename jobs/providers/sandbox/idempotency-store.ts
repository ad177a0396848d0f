/**
 * The sandbox's idempotency records, as a system of record that honours Idempotency-Key keeps
 * them: per tenant and key, the fingerprint of the first request body and, once decided, its
 * answer. Answers to 5xx and dropped requests are not stored, so a retry with the key runs again.
 */

export interface StoredAnswer {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;
}

export interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly reference: string | undefined;
  answer: StoredAnswer | undefined;
}

export type IdempotencyCheck =
  | { readonly kind: 'new' }
  | {
      readonly kind: 'replay';
      readonly answer: StoredAnswer;
      readonly reference: string | undefined;
    }
  | { readonly kind: 'in_progress' }
  | { readonly kind: 'conflict' };

export class IdempotencyStore {
  private records = new Map<string, IdempotencyRecord>();

  /** Checks a request and, when it is new, reserves the key for it. */
  claim(
    tenant: string,
    key: string,
    body: unknown,
    reference: string | undefined,
  ): IdempotencyCheck {
    const k = scope(tenant, key);
    const fingerprint = bodyFingerprint(body);
    const record = this.records.get(k);
    if (record === undefined) {
      this.records.set(k, { fingerprint, reference, answer: undefined });
      return { kind: 'new' };
    }
    if (record.fingerprint !== fingerprint) return { kind: 'conflict' };
    if (record.answer === undefined) return { kind: 'in_progress' };
    return { kind: 'replay', answer: record.answer, reference: record.reference };
  }

  settle(tenant: string, key: string, answer: StoredAnswer): void {
    const record = this.records.get(scope(tenant, key));
    if (record !== undefined) record.answer = answer;
  }

  release(tenant: string, key: string): void {
    this.records.delete(scope(tenant, key));
  }

  find(tenant: string, key: string): IdempotencyRecord | undefined {
    return this.records.get(scope(tenant, key));
  }

  reset(): void {
    this.records = new Map();
  }
}

function scope(tenant: string, key: string): string {
  return `${tenant}\u0000${key}`;
}

/**
 * The body as JSON with object keys sorted, so key order does not make a conflict. Kept whole, not
 * hashed: bodies are small (the server refuses large ones), and a hash per request is a cost.
 */
export function bodyFingerprint(body: unknown): string {
  return canonicalJson(body);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
