/**
 * Slows down token guessing: past `limit` failed authentications from one address within
 * `windowMs`, each further 401 is answered only after `delayMs`, doubling per failure up to
 * `maxDelayMs`. The answer stays a 401 (no other code to learn from); a guesser gets a handful of
 * tries a minute instead of thousands (test/unit/http/auth-failure-throttle.test.ts).
 */

/** Failures an address may make in a window before its answers are delayed: enough for typos. */
export const AUTH_FAILURE_LIMIT = 10;
/** The window failures are counted over. */
export const AUTH_FAILURE_WINDOW_MS = 60_000;
/** The delay of the first answer past the limit. */
export const AUTH_FAILURE_DELAY_MS = 1_000;
/**
 * The longest delay; stays below the listeners' request timeout (HTTP_REQUEST_TIMEOUT_MS in
 * http-listener.ts) so the delayed 401 is still delivered.
 */
export const AUTH_FAILURE_MAX_DELAY_MS = 8_000;
/** Addresses tracked at most; the oldest are forgotten first, so a flood cannot grow memory. */
export const AUTH_FAILURE_MAX_SOURCES = 10_000;

export interface AuthFailureThrottleOptions {
  readonly limit?: number;
  readonly windowMs?: number;
  readonly delayMs?: number;
  readonly maxDelayMs?: number;
  readonly maxSources?: number;
  readonly now?: () => number;
}

interface SourceFailures {
  windowStart: number;
  count: number;
}

export class AuthFailureThrottle {
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly delayMs: number;
  private readonly maxDelayMs: number;
  private readonly maxSources: number;
  private readonly now: () => number;
  private readonly sources = new Map<string, SourceFailures>();

  constructor(options: AuthFailureThrottleOptions = {}) {
    this.limit = options.limit ?? AUTH_FAILURE_LIMIT;
    this.windowMs = options.windowMs ?? AUTH_FAILURE_WINDOW_MS;
    this.delayMs = options.delayMs ?? AUTH_FAILURE_DELAY_MS;
    this.maxDelayMs = options.maxDelayMs ?? AUTH_FAILURE_MAX_DELAY_MS;
    this.maxSources = options.maxSources ?? AUTH_FAILURE_MAX_SOURCES;
    this.now = options.now ?? Date.now;
  }

  /**
   * Records one failure from `source`: how long to hold its answer (0: at once), and whether this
   * failure is the one that crossed the limit (logged once per window).
   */
  recordFailure(source: string): { readonly delayMs: number; readonly crossedLimit: boolean } {
    const now = this.now();
    let failures = this.sources.get(source);
    if (failures === undefined || now - failures.windowStart >= this.windowMs) {
      failures = { windowStart: now, count: 0 };
    }
    failures.count += 1;
    // Re-inserted so the map's order is least recently failed first.
    this.sources.delete(source);
    this.sources.set(source, failures);
    this.forgetOldest();
    const over = failures.count - this.limit;
    if (over <= 0) return { delayMs: 0, crossedLimit: false };
    return {
      delayMs: Math.min(this.maxDelayMs, this.delayMs * 2 ** Math.min(over - 1, 30)),
      crossedLimit: over === 1,
    };
  }

  private forgetOldest(): void {
    while (this.sources.size > this.maxSources) {
      const oldest = this.sources.keys().next();
      if (oldest.done === true) return;
      this.sources.delete(oldest.value);
    }
  }
}
