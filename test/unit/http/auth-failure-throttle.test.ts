import { describe, expect, it } from 'vitest';
import { AuthFailureThrottle } from '../../../jobs/http/auth-failure-throttle.ts';

function throttleAt(clock: { now: number }, maxSources?: number): AuthFailureThrottle {
  return new AuthFailureThrottle({
    limit: 3,
    windowMs: 60_000,
    delayMs: 1_000,
    maxDelayMs: 4_000,
    ...(maxSources !== undefined && { maxSources }),
    now: () => clock.now,
  });
}

describe('when one address fails again and again', () => {
  it('should answer at once up to the limit, then late, doubling up to the bound', () => {
    const clock = { now: 0 };
    const throttle = throttleAt(clock);
    const delays = Array.from({ length: 7 }, () => throttle.recordFailure('10.0.0.1').delayMs);
    expect(delays).toEqual([0, 0, 0, 1_000, 2_000, 4_000, 4_000]);
  });

  it('should say once per window that the limit was crossed', () => {
    const clock = { now: 0 };
    const throttle = throttleAt(clock);
    const crossed = Array.from({ length: 6 }, () => throttle.recordFailure('a').crossedLimit);
    expect(crossed).toEqual([false, false, false, true, false, false]);
  });

  it('should start over once the window has passed', () => {
    const clock = { now: 0 };
    const throttle = throttleAt(clock);
    for (let i = 0; i < 5; i++) throttle.recordFailure('a');
    clock.now = 60_000;
    expect(throttle.recordFailure('a').delayMs).toBe(0);
  });

  it('should count each address apart', () => {
    const clock = { now: 0 };
    const throttle = throttleAt(clock);
    for (let i = 0; i < 5; i++) throttle.recordFailure('a');
    expect(throttle.recordFailure('b').delayMs).toBe(0);
  });

  it('should forget the least recently failed address past its bound on addresses', () => {
    const clock = { now: 0 };
    const throttle = throttleAt(clock, 2);
    for (let i = 0; i < 5; i++) throttle.recordFailure('a');
    throttle.recordFailure('b');
    throttle.recordFailure('c');
    expect(throttle.recordFailure('a').delayMs).toBe(0);
  });
});
