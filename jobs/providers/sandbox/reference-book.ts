/**
 * What the sandbox knows about each operation reference (our operation id) per service: the
 * requests in flight for it, and its outcome once decided. Lookup and cancel read it.
 */

export type ReferenceOutcome =
  | {
      readonly state: 'committed';
      readonly result: Readonly<Record<string, unknown>>;
      readonly providerRef: string;
      count: number;
    }
  | { readonly state: 'failed'; readonly code: string; readonly message: string }
  | { readonly state: 'cancelled' };

export interface InFlightRequest {
  /** The attempt's fence token (X-Callgate-Attempt-Token), when the request carried one. */
  readonly attemptToken?: string;
  /** How a cancel of this request is treated (from the request's fault spec). */
  readonly cancelMode: 'on' | 'off' | 'deferred';
  /** `processing`: lookups answer "still processing" while it is in flight. */
  readonly lookupProcessing: boolean;
  cancelRequested: boolean;
  /** Ends the request's pre-commit wait early (a confirmed cancel). */
  wake(): void;
}

export class ReferenceBook {
  private outcomes = new Map<string, ReferenceOutcome>();
  private inFlight = new Map<string, Set<InFlightRequest>>();
  /** Outcomes whose lookups keep answering "processing" (a lookup=processing fault on the request). */
  private stuck = new Set<string>();
  /** Attempt tokens voided per reference: a request carrying one is refused, whenever it arrives. */
  private voided = new Map<string, Set<string>>();

  outcome(service: string, reference: string): ReferenceOutcome | undefined {
    return this.outcomes.get(key(service, reference));
  }

  /** Records a decided outcome; a committed reference stays committed (later commits count up). */
  decide(service: string, reference: string, outcome: ReferenceOutcome): void {
    const k = key(service, reference);
    const prior = this.outcomes.get(k);
    if (prior?.state === 'committed') {
      if (outcome.state === 'committed') prior.count += 1;
      return;
    }
    this.outcomes.set(k, outcome);
  }

  markStuck(service: string, reference: string): void {
    this.stuck.add(key(service, reference));
  }

  isStuck(service: string, reference: string): boolean {
    return this.stuck.has(key(service, reference));
  }

  enter(service: string, reference: string, request: InFlightRequest): () => void {
    const k = key(service, reference);
    let set = this.inFlight.get(k);
    if (set === undefined) {
      set = new Set();
      this.inFlight.set(k, set);
    }
    set.add(request);
    return () => {
      set.delete(request);
      if (set.size === 0 && this.inFlight.get(k) === set) this.inFlight.delete(k);
    };
  }

  pending(service: string, reference: string): readonly InFlightRequest[] {
    return [...(this.inFlight.get(key(service, reference)) ?? [])];
  }

  /** Every in-flight request, for shutdown. */
  all(): readonly InFlightRequest[] {
    return [...this.inFlight.values()].flatMap((set) => [...set]);
  }

  /** From now on a request of `reference` carrying one of `tokens` takes no effect. */
  voidTokens(service: string, reference: string, tokens: readonly string[]): void {
    const k = key(service, reference);
    const set = this.voided.get(k) ?? new Set<string>();
    for (const token of tokens) set.add(token);
    this.voided.set(k, set);
  }

  isVoided(service: string, reference: string, token: string | undefined): boolean {
    return token !== undefined && (this.voided.get(key(service, reference))?.has(token) ?? false);
  }

  reset(): void {
    this.outcomes = new Map();
    this.stuck = new Set();
    this.voided = new Map();
  }
}

function key(service: string, reference: string): string {
  return `${service}\u0000${reference}`;
}
