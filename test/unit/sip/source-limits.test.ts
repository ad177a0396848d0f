/** The per-source limits both drivers share, on a clock moved by hand. */
import { describe, expect, it } from 'vitest';
import { SourceLimits } from '../../../gateway/sip/source-limits.ts';

describe('when a source sends INVITEs faster than inviteRatePerSource', () => {
  it('should admit the burst, reject the next with Retry-After, and admit again once a token is back', () => {
    let now = 0;
    const limits = new SourceLimits({
      sip: { inviteRatePerSource: 2, authFailuresPerMinute: 30 },
      now: () => now,
    });
    expect([limits.admitInvite('192.0.2.1'), limits.admitInvite('192.0.2.1')]).toEqual([
      { type: 'allow' },
      { type: 'allow' },
    ]);
    expect(limits.admitInvite('192.0.2.1')).toEqual({
      type: 'reject',
      limit: 'invite',
      retryAfterSeconds: 1,
    });
    expect(limits.admitInvite('192.0.2.2')).toEqual({ type: 'allow' });
    now += 500;
    expect(limits.admitInvite('192.0.2.1')).toEqual({ type: 'allow' });
  });

  it('should tell a source limited to less than one INVITE a second to wait more than a second', () => {
    let now = 0;
    const limits = new SourceLimits({
      sip: { inviteRatePerSource: 0.25, authFailuresPerMinute: 30 },
      now: () => now,
    });
    expect(limits.admitInvite('a').type).toBe('allow');
    expect(limits.admitInvite('a')).toEqual({
      type: 'reject',
      limit: 'invite',
      retryAfterSeconds: 4,
    });
    now += 4000;
    expect(limits.admitInvite('a').type).toBe('allow');
  });
});

describe('when a source keeps failing authentication', () => {
  it('should admit attempts until authFailuresPerMinute failures, then reject with the wait until the next', () => {
    let now = 0;
    const limits = new SourceLimits({
      sip: { inviteRatePerSource: 1000, authFailuresPerMinute: 3 },
      now: () => now,
    });
    for (let i = 0; i < 3; i++) {
      expect(limits.admitAuthentication('a')).toEqual({ type: 'allow' });
      limits.recordAuthFailure('a');
    }
    // One failure comes back every 20 s at 3 a minute.
    expect(limits.admitAuthentication('a')).toEqual({
      type: 'reject',
      limit: 'auth-failures',
      retryAfterSeconds: 20,
    });
    expect(limits.admitAuthentication('b')).toEqual({ type: 'allow' });
    now += 10_000;
    expect(limits.admitAuthentication('a')).toEqual({
      type: 'reject',
      limit: 'auth-failures',
      retryAfterSeconds: 10,
    });
    now += 10_000;
    expect(limits.admitAuthentication('a')).toEqual({ type: 'allow' });
  });

  it('should not count an attempt that is only checked', () => {
    const limits = new SourceLimits({
      sip: { inviteRatePerSource: 1000, authFailuresPerMinute: 1 },
      now: () => 0,
    });
    for (let i = 0; i < 5; i++) expect(limits.admitAuthentication('a').type).toBe('allow');
  });
});
