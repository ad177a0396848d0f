/**
 * Nonces for SIP digest challenges (RFC 3261 section 22.4, RFC 2617): random, valid for a
 * limited time, and usable once, so a captured Authorization header cannot be replayed.
 */
import { randomBytes } from 'node:crypto';

export interface DigestNonceStoreOptions {
  readonly lifetimeMs: number;
  /** Outstanding nonces kept at most; the oldest are forgotten first. */
  readonly maxOutstanding?: number;
  readonly now?: () => number;
}

/**
 * 30 s: a caller answers a challenge within a round trip or two, so this is generous even on a
 * slow trunk, and short enough that a nonce seen on the wire is soon worthless. Used nonces are
 * removed at once; the lifetime only bounds the ones never answered.
 */
export const NONCE_LIFETIME_MS = 30_000;
const DEFAULT_MAX_OUTSTANDING = 100_000;

export type NonceCheck = 'valid' | 'stale' | 'unknown';

export class DigestNonceStore {
  private readonly outstanding = new Map<string, number>();
  private readonly now: () => number;

  constructor(
    private readonly options: DigestNonceStoreOptions = { lifetimeMs: NONCE_LIFETIME_MS },
  ) {
    this.now = options.now ?? Date.now;
  }

  issue(): string {
    const now = this.now();
    const max = this.options.maxOutstanding ?? DEFAULT_MAX_OUTSTANDING;
    // Nonces are kept in the order they expire (one lifetime for all): the expired ones are at
    // the head, so challenges nobody answers (a scanner) are forgotten as they expire instead of
    // piling up to maxOutstanding.
    for (const [nonce, expires] of this.outstanding) {
      if (expires <= now || this.outstanding.size >= max) this.outstanding.delete(nonce);
      else break;
    }
    const nonce = randomBytes(16).toString('base64url');
    this.outstanding.set(nonce, now + this.options.lifetimeMs);
    return nonce;
  }

  /** Checks a nonce without using it up (a wrong password must not burn the nonce for a retry). */
  check(nonce: string): NonceCheck {
    const expires = this.outstanding.get(nonce);
    if (expires === undefined) return 'unknown';
    if (expires <= this.now()) {
      this.outstanding.delete(nonce);
      return 'stale';
    }
    return 'valid';
  }

  /** Nonces issued and neither used nor expired yet (kept at most maxOutstanding). */
  get size(): number {
    return this.outstanding.size;
  }

  /** Uses a nonce up after a successful authentication. */
  consume(nonce: string): void {
    this.outstanding.delete(nonce);
  }
}
