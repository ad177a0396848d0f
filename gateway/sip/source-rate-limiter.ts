/**
 * A token bucket per source address: `ratePerSecond` sustained, bursts up to `burst`. Used for
 * INVITEs per source and for failed authentications per source.
 */

export interface SourceRateLimiterOptions {
  readonly ratePerSecond: number;
  readonly burst: number;
  /** Buckets kept at most; idle (full) buckets are dropped first so a spoofed flood cannot grow memory. */
  readonly maxSources?: number;
  readonly now?: () => number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

const DEFAULT_MAX_SOURCES = 50_000;

export class SourceRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;

  constructor(private readonly options: SourceRateLimiterOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Takes one token for `source`; false when the source is over its rate. */
  take(source: string): boolean {
    const bucket = this.refill(source);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** Whether `source` has a token left, without taking one. */
  allows(source: string): boolean {
    return this.refill(source).tokens >= 1;
  }

  /** Seconds until `source` has a token again (for Retry-After). */
  retryAfterSeconds(source: string): number {
    const bucket = this.refill(source);
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.options.ratePerSecond));
  }

  private refill(source: string): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(source);
    if (bucket === undefined) {
      if (this.buckets.size >= (this.options.maxSources ?? DEFAULT_MAX_SOURCES)) this.prune(now);
      bucket = { tokens: this.options.burst, updatedMs: now };
      this.buckets.set(source, bucket);
      return bucket;
    }
    const elapsed = Math.max(0, now - bucket.updatedMs) / 1000;
    bucket.tokens = Math.min(
      this.options.burst,
      bucket.tokens + elapsed * this.options.ratePerSecond,
    );
    bucket.updatedMs = now;
    return bucket;
  }

  private prune(now: number): void {
    for (const [source, bucket] of this.buckets) {
      const tokens =
        bucket.tokens + (Math.max(0, now - bucket.updatedMs) / 1000) * this.options.ratePerSecond;
      if (tokens >= this.options.burst) this.buckets.delete(source);
    }
    // Still full of active sources: forget the oldest rather than grow.
    if (this.buckets.size >= (this.options.maxSources ?? DEFAULT_MAX_SOURCES)) {
      const oldest = this.buckets.keys().next();
      if (oldest.done !== true) this.buckets.delete(oldest.value);
    }
  }
}
