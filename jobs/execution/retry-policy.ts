/**
 * When to retry (pure): exponential backoff with full jitter, capped, never past the operation's
 * deadline and never beyond the attempt limit. The retry budget (a sliding window in Redis) is
 * checked separately, after this says a retry is worth trying.
 */
import type { RetryConfig } from '../../config/schema.ts';

export type RetryDecision =
  | { readonly retry: true; readonly delayMs: number }
  | { readonly retry: false; readonly reason: 'attempts_exhausted' | 'deadline' };

/**
 * `attempt` is the attempt that just failed (1 for the first). `random` returns [0, 1).
 * Full jitter (a uniform delay up to the exponential bound) spreads retries of many operations that
 * failed together, so a provider that comes back is not hit by all of them at once.
 */
export function decideRetry(
  retry: Pick<RetryConfig, 'maxAttempts' | 'backoffMs' | 'maxBackoffMs'>,
  attempt: number,
  now: number,
  deadlineAt: number,
  random: () => number = Math.random,
): RetryDecision {
  if (attempt >= retry.maxAttempts) return { retry: false, reason: 'attempts_exhausted' };
  const bound = Math.min(retry.maxBackoffMs, retry.backoffMs * 2 ** (attempt - 1));
  // Never less than the base delay: a zero delay would hammer a provider that just failed.
  const delayMs = Math.max(retry.backoffMs, Math.round(bound * random()));
  if (now + delayMs >= deadlineAt) return { retry: false, reason: 'deadline' };
  return { retry: true, delayMs };
}
