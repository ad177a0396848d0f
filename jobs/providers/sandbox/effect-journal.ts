/**
 * What the sandbox actually did, for tests to count: every committed effect, the requests
 * received per operation reference, and the highest number of requests it processed at once per
 * tenant and per tenant and operation.
 */

export interface SandboxEffect {
  readonly seq: number;
  readonly service: string;
  readonly operation: string;
  readonly tenant: string;
  /** Our operation id as the request carried it, if it did. */
  readonly reference: string | undefined;
  readonly idempotencyKey: string | undefined;
  readonly providerRef: string;
  readonly at: string;
  readonly result: Readonly<Record<string, unknown>>;
}

export interface ConcurrencyLevel {
  current: number;
  max: number;
}

/**
 * Per tenant and operation, also how many requests began at each level (the level counting the
 * request itself): `entered["3"] = 5` means five requests began while two others were in progress.
 * A checker counts the requests that began above an action's limit without sampling the level.
 */
export interface OperationConcurrency extends ConcurrencyLevel {
  entered: Record<string, number>;
  /**
   * The requests in progress each time one began beside another, to tell why: the first
   * OVERLAPS_KEPT at each level, so the rare overlaps above an action's limit are never crowded
   * out by the many at or below it.
   */
  overlaps?: ConcurrencyOverlap[];
}

/** One request that began while others were in progress, with all of them (itself last). */
export interface ConcurrencyOverlap {
  readonly at: string;
  readonly inProgress: readonly InProgressRequest[];
}

export interface InProgressRequest {
  readonly reference: string | undefined;
  readonly attemptToken: string | undefined;
  readonly since: string;
}

const OVERLAPS_KEPT = 200;

export interface ConcurrencyReport {
  readonly tenants: Record<
    string,
    ConcurrencyLevel & { operations: Record<string, OperationConcurrency> }
  >;
}

export class EffectJournal {
  private effects: SandboxEffect[] = [];
  private requests = new Map<string, number>();
  private concurrency: ConcurrencyReport = { tenants: {} };
  private inProgress: Record<string, Set<InProgressRequest>> = {};
  /** Overlaps kept so far per tenant, operation and level (see OperationConcurrency.overlaps). */
  private overlapsKept = new Map<string, number>();

  commit(effect: Omit<SandboxEffect, 'seq' | 'at'>): SandboxEffect {
    // Spelled out: a spread that adds properties takes V8's slow path, several µs per request.
    const recorded: SandboxEffect = {
      seq: this.effects.length + 1,
      service: effect.service,
      operation: effect.operation,
      tenant: effect.tenant,
      reference: effect.reference,
      idempotencyKey: effect.idempotencyKey,
      providerRef: effect.providerRef,
      at: new Date().toISOString(),
      result: effect.result,
    };
    this.effects.push(recorded);
    return recorded;
  }

  list(
    filter: { service?: string; tenant?: string; reference?: string; operation?: string } = {},
  ): readonly SandboxEffect[] {
    return this.effects.filter(
      (e) =>
        (filter.service === undefined || e.service === filter.service) &&
        (filter.tenant === undefined || e.tenant === filter.tenant) &&
        (filter.reference === undefined || e.reference === filter.reference) &&
        (filter.operation === undefined || e.operation === filter.operation),
    );
  }

  requestReceived(reference: string | undefined): void {
    if (reference === undefined) return;
    this.requests.set(reference, (this.requests.get(reference) ?? 0) + 1);
  }

  /** Effects and requests per operation reference. */
  counts(): { effects: Record<string, number>; requests: Record<string, number> } {
    const effects: Record<string, number> = {};
    for (const e of this.effects) {
      if (e.reference !== undefined) effects[e.reference] = (effects[e.reference] ?? 0) + 1;
    }
    return { effects, requests: Object.fromEntries(this.requests) };
  }

  /** Marks a request as being processed; the returned function ends it (idempotently). */
  begin(
    tenant: string,
    operation: string,
    request: { readonly reference?: string; readonly attemptToken?: string } = {},
  ): () => void {
    const perTenant = (this.concurrency.tenants[tenant] ??= { current: 0, max: 0, operations: {} });
    const perOperation = (perTenant.operations[operation] ??= {
      current: 0,
      max: 0,
      entered: {},
      overlaps: [],
    });
    for (const level of [perTenant, perOperation]) {
      level.current += 1;
      level.max = Math.max(level.max, level.current);
    }
    const at = String(perOperation.current);
    perOperation.entered[at] = (perOperation.entered[at] ?? 0) + 1;
    const inProgress: InProgressRequest = {
      reference: request.reference,
      attemptToken: request.attemptToken,
      since: new Date().toISOString(),
    };
    const running = (this.inProgress[`${tenant}\u0000${operation}`] ??= new Set());
    running.add(inProgress);
    if (running.size > 1) {
      const levelKey = `${tenant}\u0000${operation}\u0000${running.size}`;
      const kept = this.overlapsKept.get(levelKey) ?? 0;
      if (kept < OVERLAPS_KEPT) {
        this.overlapsKept.set(levelKey, kept + 1);
        (perOperation.overlaps ??= []).push({ at: inProgress.since, inProgress: [...running] });
      }
    }
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      running.delete(inProgress);
      perTenant.current -= 1;
      perOperation.current -= 1;
    };
  }

  concurrencyReport(): ConcurrencyReport {
    return this.concurrency;
  }

  reset(): void {
    this.effects = [];
    this.requests = new Map();
    // Requests still in flight keep their own level objects; a fresh report starts from zero.
    this.concurrency = { tenants: {} };
    this.inProgress = {};
    this.overlapsKept = new Map();
  }
}
