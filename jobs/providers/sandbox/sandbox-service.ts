/**
 * What a sandbox service (bookings, payments) implements. Services are pure state machines over
 * in-memory data; the server around them handles HTTP, faults, idempotency and reporting.
 */

export interface ServiceContext {
  readonly tenant: string;
  readonly reference: string | undefined;
  readonly idempotencyKey: string | undefined;
}

export interface ServiceAnswer {
  readonly status: number;
  /** `{ result, provider_ref }` on success, `{ error: { code, message } }` otherwise. */
  readonly body: Readonly<Record<string, unknown>>;
  /** Set when the answer committed a side effect. */
  readonly effect?: {
    readonly providerRef: string;
    readonly result: Readonly<Record<string, unknown>>;
  };
}

export interface SandboxService {
  readonly name: string;
  /** A repeated request with the same Idempotency-Key returns the first answer, no new effect. */
  readonly honoursIdempotencyKeys: boolean;
  operations(): readonly string[];
  isMutation(operation: string): boolean;
  apply(
    operation: string,
    body: Readonly<Record<string, unknown>>,
    context: ServiceContext,
  ): ServiceAnswer;
  /** Back to the seeded state. */
  reset(): void;
}

export function answerOk(
  result: Record<string, unknown>,
  providerRef: string,
  effect: boolean,
  status = 200,
): ServiceAnswer {
  const body = { result, provider_ref: providerRef };
  return effect ? { status, body, effect: { providerRef, result } } : { status, body };
}

export function answerError(status: number, code: string, message: string): ServiceAnswer {
  return { status, body: { error: { code, message } } };
}

/** Checks required string fields; returns the problems, empty when none. */
export function missingStrings(
  body: Readonly<Record<string, unknown>>,
  names: readonly string[],
): string[] {
  return names
    .filter((name) => typeof body[name] !== 'string' || body[name] === '')
    .map((name) => `${name} must be a non-empty string`);
}
