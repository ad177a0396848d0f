/**
 * The per-source limits in front of call routing and trunk security, shared by both drivers: a
 * token bucket of INVITEs per source address, and one of failed authentications per source. A
 * source over either limit is answered 503 with Retry-After (RFC 3261 section 21.5.4): a real
 * trunk backs off for that long, and a guessing one gets no more challenges to work on.
 */
import type { SipConfig } from '../../config/schema.ts';
import { SourceRateLimiter } from './source-rate-limiter.ts';

export type SourceLimit = 'invite' | 'auth-failures';

export type SourceLimitDecision =
  | { readonly type: 'allow' }
  | { readonly type: 'reject'; readonly limit: SourceLimit; readonly retryAfterSeconds: number };

export interface SourceLimitsOptions {
  readonly sip: Pick<SipConfig, 'inviteRatePerSource' | 'authFailuresPerMinute'>;
  readonly now?: () => number;
}

const ALLOW: SourceLimitDecision = { type: 'allow' };

export class SourceLimits {
  private readonly invites: SourceRateLimiter;
  private readonly authFailures: SourceRateLimiter;

  constructor(options: SourceLimitsOptions) {
    const { sip, now } = options;
    const clock = now !== undefined ? { now } : {};
    this.invites = new SourceRateLimiter({
      ratePerSecond: sip.inviteRatePerSource,
      burst: Math.max(1, sip.inviteRatePerSource),
      ...clock,
    });
    this.authFailures = new SourceRateLimiter({
      ratePerSecond: sip.authFailuresPerMinute / 60,
      burst: sip.authFailuresPerMinute,
      ...clock,
    });
  }

  /** Takes one INVITE token for `source`: every new INVITE, before anything else is done with it. */
  admitInvite(source: string): SourceLimitDecision {
    if (this.invites.take(source)) return ALLOW;
    return {
      type: 'reject',
      limit: 'invite',
      retryAfterSeconds: this.invites.retryAfterSeconds(source),
    };
  }

  /** Whether `source` may still try to authenticate; checked before trunk security runs. */
  admitAuthentication(source: string): SourceLimitDecision {
    if (this.authFailures.allows(source)) return ALLOW;
    return {
      type: 'reject',
      limit: 'auth-failures',
      retryAfterSeconds: this.authFailures.retryAfterSeconds(source),
    };
  }

  /** A failed authentication from `source` (bad credentials, stale or unknown nonce, refused address). */
  recordAuthFailure(source: string): void {
    this.authFailures.take(source);
  }
}
