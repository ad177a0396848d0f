/**
 * Redis key names for the ledger. Every key of a tenant carries the hash tag `{t:<tenant>}`, so
 * one operation's keys, its tenant's indexes, leases, budgets and result streams all live in one
 * Redis Cluster slot and a script may touch them together. The one global key, the pointer from an
 * operation id to its tenant, is written outside scripts and never changes.
 */

/**
 * The member one attempt holds in its action's lease set (`lease(...)`): the operation id and the
 * attempt, so an outdated attempt can neither renew nor give back the lease of the attempt that
 * replaced it. start-5.lua writes the same form.
 */
export function leaseHolder(operationId: string, attempt: number): string {
  return `${operationId}:${attempt}`;
}

export class LedgerKeys {
  constructor(readonly prefix: string) {}

  private tenant(tenantId: string): string {
    return `${this.prefix}:{t:${tenantId}}`;
  }

  operation(tenantId: string, operationId: string): string {
    return `${this.tenant(tenantId)}:op:${operationId}`;
  }
  history(tenantId: string, operationId: string): string {
    return `${this.tenant(tenantId)}:op:${operationId}:h`;
  }
  idempotency(tenantId: string, idempotencyKey: string): string {
    return `${this.tenant(tenantId)}:idem:${idempotencyKey}`;
  }
  coalesce(tenantId: string, coalesceKey: string): string {
    return `${this.tenant(tenantId)}:coalesce:${coalesceKey}`;
  }
  open(tenantId: string): string {
    return `${this.tenant(tenantId)}:open`;
  }
  unknown(tenantId: string): string {
    return `${this.tenant(tenantId)}:unknown`;
  }
  active(tenantId: string, action: string): string {
    return `${this.tenant(tenantId)}:active:${action}`;
  }
  session(tenantId: string, sessionId: string): string {
    return `${this.tenant(tenantId)}:session:${sessionId}`;
  }
  outbox(tenantId: string): string {
    return `${this.tenant(tenantId)}:outbox`;
  }
  /** The action's concurrency leases: a zset of `leaseHolder(...)` members -> expiry ms. */
  lease(tenantId: string, action: string): string {
    return `${this.tenant(tenantId)}:lease:${action}`;
  }
  budgetRequests(tenantId: string, action: string): string {
    return `${this.tenant(tenantId)}:budget:req:${action}`;
  }
  budgetRetries(tenantId: string, action: string): string {
    return `${this.tenant(tenantId)}:budget:retry:${action}`;
  }
  /** Committed operations owed a compensation not admitted yet (zset: original id -> ms owed since). */
  compensationsOwed(tenantId: string): string {
    return `${this.tenant(tenantId)}:comp:owed`;
  }
  /** Committed operations whose linked compensation has not ended yet (zset: original id -> ms linked). */
  compensationsInFlight(tenantId: string): string {
    return `${this.tenant(tenantId)}:comp:inflight`;
  }
  /** A counter written before WAIT, so a WAIT covers every write answered before it (writesDurable). */
  durabilityProbe(): string {
    return `${this.prefix}:durability-probe`;
  }
  /** The result stream a gateway reads for one tenant's operations. */
  results(tenantId: string, gatewayId: string): string {
    return `${this.tenant(tenantId)}:results:${gatewayId}`;
  }
  /** Out-of-band messages that gave up: a zset of `<operation id> <channel>` -> when first queued (ms). */
  outOfBandGivenUp(tenantId: string): string {
    return `${this.tenant(tenantId)}:oob:gave_up`;
  }
  /** Global pointer operation id -> tenant id (for lookups by id alone). */
  tenantOf(operationId: string): string {
    return `${this.prefix}:optenant:${operationId}`;
  }
}
