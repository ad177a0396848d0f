/**
 * Call admission: whether a new INVITE gets a call, decided before any media port or model session
 * is taken. Pure: the acceptor passes what it counts and measures, and sends what this returns
 * (test/unit/call/call-admission.test.ts pins every row).
 *
 * Order of the checks: draining, then the event loop, then the gateway's limit, then the tenant's.
 * A gateway that cannot take any call says so (503, so the carrier tries another gateway) before
 * a tenant's own limit is looked at.
 *
 * Why a tenant at its limit gets 486 Busy Here and not 503: the tenant is busy wherever the call
 * goes (its lines are in use), so a carrier that hunted to another gateway on 503 would only
 * spread the same refusal; 486 ends the attempt and the caller hears busy. 503 means this gateway
 * cannot serve now, and another one may.
 */

export interface AdmissionLimits {
  /** gateway.maxCalls. */
  readonly maxCalls: number;
  /** tenants[].maxCalls of the call's tenant; undefined: no tenant limit. */
  readonly tenantMaxCalls: number | undefined;
  /** gateway.maxEventLoopDelayMs. */
  readonly maxEventLoopDelayMs: number;
  /** gateway.retryAfterSeconds. */
  readonly retryAfterSeconds: number;
}

export interface AdmissionLoad {
  /** Calls this gateway holds now, calls being set up included. */
  readonly gatewayCalls: number;
  /** Of them, the call's tenant's. */
  readonly tenantCalls: number;
  /** The event loop delay statistic (event-loop-delay.ts), in ms. */
  readonly eventLoopDelayMs: number;
  /** The process is shutting down. */
  readonly draining: boolean;
}

/** Why a call was refused; the `reason` label of callgate_calls_refused_total. */
export type RefusalReason =
  | 'draining'
  | 'overloaded'
  | 'gateway_full'
  | 'tenant_full'
  /** The media ports or the model session could not be opened while the call rang. */
  | 'setup_failed'
  /** They were not open within gateway.setupTimeoutMs. */
  | 'setup_timeout';

export type AdmissionDecision =
  | { readonly admit: true }
  | {
      readonly admit: false;
      readonly reason: RefusalReason;
      readonly status: 486 | 503;
      readonly phrase: string;
      /** Sent as Retry-After with every 503; a 486 carries none (the tenant, not the gateway, is busy). */
      readonly retryAfterSeconds?: number;
    };

const ADMIT: AdmissionDecision = { admit: true };

/** A 503 with Retry-After, the refusal of a gateway that cannot serve now. */
export function unavailable(
  reason: Exclude<RefusalReason, 'tenant_full'>,
  retryAfterSeconds: number,
): AdmissionDecision {
  return { admit: false, reason, status: 503, phrase: 'Service Unavailable', retryAfterSeconds };
}

export function admitCall(limits: AdmissionLimits, load: AdmissionLoad): AdmissionDecision {
  const retry = limits.retryAfterSeconds;
  if (load.draining) return unavailable('draining', retry);
  if (load.eventLoopDelayMs > limits.maxEventLoopDelayMs) return unavailable('overloaded', retry);
  if (load.gatewayCalls >= limits.maxCalls) return unavailable('gateway_full', retry);
  if (limits.tenantMaxCalls !== undefined && load.tenantCalls >= limits.tenantMaxCalls)
    return { admit: false, reason: 'tenant_full', status: 486, phrase: 'Busy Here' };
  return ADMIT;
}

/** The SIP headers a refusal carries (Retry-After on a 503). */
export function refusalHeaders(
  decision: AdmissionDecision,
): readonly { readonly name: string; readonly value: string }[] {
  if (decision.admit || decision.retryAfterSeconds === undefined) return [];
  return [{ name: 'Retry-After', value: String(decision.retryAfterSeconds) }];
}

/** Free call slots of the gateway (never below 0), for the slots gauge and readiness. */
export function slotsAvailable(maxCalls: number, gatewayCalls: number): number {
  return Math.max(0, maxCalls - gatewayCalls);
}
