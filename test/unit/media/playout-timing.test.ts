import { describe, expect, it } from 'vitest';
import {
  FrameSchedule,
  MAX_BACKLOG_FRAMES,
  MAX_CATCH_UP_FRAMES,
} from '../../../gateway/media/frame-schedule.ts';
import { MonotonicMediaTimer, type MediaTimer } from '../../../gateway/media/media-timer.ts';
import { Playout } from '../../../gateway/media/playout.ts';
import {
  PlayoutScheduler,
  type PlayoutRegistration,
} from '../../../gateway/media/playout-scheduler.ts';
import { FakeMediaTimer } from './fake-media-timer.ts';
import { seededRandom } from './seeded-random.ts';

interface Sent {
  readonly atMs: number;
  readonly index: number;
  readonly dueMs: number;
}

/** A call's send side as RtpSession wires it: a frame schedule from its slot, and a playout. */
class PacedSender {
  readonly sent: Sent[] = [];
  readonly playout = new Playout();
  private schedule: FrameSchedule | undefined;
  registration: PlayoutRegistration | undefined;
  constructor(private readonly timer: MediaTimer) {}
  attach(scheduler: PlayoutScheduler): void {
    this.registration = scheduler.add(this);
    this.schedule = new FrameSchedule({ startMs: this.registration.startMs });
  }
  tick(nowMs: number): void {
    for (const due of this.schedule?.due(nowMs) ?? []) {
      const frame = this.playout.next();
      if (frame.kind === 'audio')
        this.sent.push({ atMs: this.timer.now(), index: due.index, dueMs: due.dueMs });
    }
  }
  get skipped(): number {
    return this.schedule?.skippedFrames ?? 0;
  }
}

function intervals(sent: readonly Sent[]): number[] {
  return sent.slice(1).map((s, i) => s.atMs - (sent[i] as Sent).atMs);
}

describe('when pacing 60 s of audio on a fake clock', () => {
  it('should space frames 20 ms +- 1 ms with no drift when wake-ups land up to 0.9 ms late', () => {
    const timer = new FakeMediaTimer();
    const random = seededRandom(11);
    timer.lateness = () => random() * 0.9;
    const scheduler = new PlayoutScheduler({ timer });
    const sender = new PacedSender(timer);
    sender.playout.enqueue(
      'item_a',
      Array.from({ length: 3000 }, () => Buffer.alloc(160)),
    );
    sender.attach(scheduler);
    timer.run(60_000);
    expect(sender.sent).toHaveLength(3000);
    for (const gap of intervals(sender.sent)) {
      expect(gap).toBeGreaterThanOrEqual(19);
      expect(gap).toBeLessThanOrEqual(21);
    }
    const first = sender.sent[0] as Sent;
    const last = sender.sent[2999] as Sent;
    // Frame 2999 leaves within a millisecond of start + 2999 * 20 ms: nothing accumulated.
    expect(Math.abs(last.atMs - first.atMs - 2999 * 20)).toBeLessThanOrEqual(1);
    for (const s of sender.sent) expect(s.atMs - s.dueMs).toBeLessThanOrEqual(1);
  });

  it('should not drift when every wake-up is late by the same amount (where a setTimeout chain would)', () => {
    const timer = new FakeMediaTimer();
    timer.lateness = () => 0.8;
    const scheduler = new PlayoutScheduler({ timer });
    const sender = new PacedSender(timer);
    sender.playout.enqueue(
      'item_a',
      Array.from({ length: 3000 }, () => Buffer.alloc(160)),
    );
    sender.attach(scheduler);
    timer.run(60_000);
    expect(sender.sent).toHaveLength(3000);
    const lateness = sender.sent.map((s) => s.atMs - s.dueMs);
    expect(Math.max(...lateness)).toBeLessThanOrEqual(1);
    expect(sender.sent.map((s) => s.index)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });

  it('should catch up a 100 ms stall in bursts of at most three frames, skipping none', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer });
    const sender = new PacedSender(timer);
    sender.playout.enqueue(
      'item_a',
      Array.from({ length: 200 }, () => Buffer.alloc(160)),
    );
    sender.attach(scheduler);
    // The wake-up due at 1000 ms lands 100 ms late.
    timer.lateness = (at) => (at >= 1000 && at < 1010 ? 100 : 0);
    timer.run(3000);
    const perInstant = new Map<number, number>();
    for (const s of sender.sent) perInstant.set(s.atMs, (perInstant.get(s.atMs) ?? 0) + 1);
    expect(Math.max(...perInstant.values())).toBe(MAX_CATCH_UP_FRAMES);
    expect(sender.skipped).toBe(0);
    // Every frame index went out once, in order: the RTP timestamps have no gap.
    expect(sender.sent.map((s) => s.index)).toEqual(
      Array.from({ length: sender.sent.length }, (_, i) => i),
    );
    // Within 100 ms after the stall the schedule is met again.
    for (const s of sender.sent.filter((x) => x.atMs > 1250))
      expect(s.atMs - s.dueMs).toBeLessThanOrEqual(1);
  });

  it('should skip the backlog of a stall longer than 200 ms instead of playing seconds late', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer });
    const sender = new PacedSender(timer);
    sender.playout.enqueue(
      'item_a',
      Array.from({ length: 200 }, () => Buffer.alloc(160)),
    );
    sender.attach(scheduler);
    // The wake-up due at 1000 ms lands 500 ms late.
    timer.lateness = (at) => (at >= 1000 && at < 1010 ? 500 : 0);
    timer.run(3000);
    expect(sender.skipped).toBeGreaterThan(MAX_BACKLOG_FRAMES);
    for (const s of sender.sent.filter((x) => x.atMs > 1600))
      expect(s.atMs - s.dueMs).toBeLessThanOrEqual(1);
    const indexes = sender.sent.map((s) => s.index);
    expect(new Set(indexes).size).toBe(indexes.length);
  });
});

describe('when many calls share the scheduler', () => {
  it('should spread their send slots across the 20 ms frame', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, slots: 10, slotCapacity: 10 });
    const senders = Array.from({ length: 100 }, () => new PacedSender(timer));
    for (const sender of senders) {
      sender.playout.enqueue(
        'item',
        Array.from({ length: 50 }, () => Buffer.alloc(160)),
      );
      sender.attach(scheduler);
    }
    timer.run(500);
    const bySlot = new Map<number, number>();
    for (const sender of senders)
      bySlot.set(
        sender.registration?.slot ?? -1,
        (bySlot.get(sender.registration?.slot ?? -1) ?? 0) + 1,
      );
    expect([...bySlot.values()]).toEqual(Array.from({ length: 10 }, () => 10));
    // Within one frame period sends happen at 10 distinct instants, 2 ms apart, 10 calls each.
    const window = senders.flatMap((s) =>
      s.sent.filter((x) => x.atMs >= 200 && x.atMs < 220).map((x) => x.atMs),
    );
    const instants = new Map<number, number>();
    for (const at of window) instants.set(at, (instants.get(at) ?? 0) + 1);
    expect([...instants.keys()].sort((a, b) => a - b)).toEqual([
      200, 202, 204, 206, 208, 210, 212, 214, 216, 218,
    ]);
    expect([...instants.values()].every((n) => n === 10)).toBe(true);
  });

  it('should share one wake-up per frame among a few calls and open slots across the frame as calls grow', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, slots: 10, slotCapacity: 50 });
    const few = Array.from({ length: 30 }, () => new PacedSender(timer));
    for (const sender of few) sender.attach(scheduler);
    timer.run(1000);
    // One wake-up per 20 ms frame (plus the first).
    expect(scheduler.wakeupCount).toBeLessThanOrEqual(52);
    const more = Array.from({ length: 70 }, () => new PacedSender(timer));
    for (const sender of more) sender.attach(scheduler);
    const slots = new Set([...few, ...more].map((s) => s.registration?.slot));
    // The second slot opens half a frame after the first.
    expect([...slots]).toEqual([0, 5]);
  });

  it('should give heavier (transcoding) calls fewer neighbours per slot', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, slots: 10, slotCapacity: 100 });
    const slots = Array.from({ length: 25 }, () => scheduler.add({ tick: () => {} }, 10).slot);
    expect(slots.filter((s) => s === 0)).toHaveLength(10);
    expect(slots.filter((s) => s === 5)).toHaveLength(10);
    expect(slots.filter((s) => s === 2)).toHaveLength(5);
  });

  it('should keep ticking the other calls when one call throws', () => {
    const timer = new FakeMediaTimer();
    const errors: unknown[] = [];
    const scheduler = new PlayoutScheduler({ timer, onError: (error) => errors.push(error) });
    scheduler.add({
      tick: () => {
        throw new Error('broken call');
      },
    });
    const sender = new PacedSender(timer);
    sender.playout.enqueue(
      'item',
      Array.from({ length: 10 }, () => Buffer.alloc(160)),
    );
    sender.attach(scheduler);
    timer.run(300);
    expect(sender.sent).toHaveLength(10);
    expect(errors.length).toBeGreaterThanOrEqual(10);
  });

  it('should stop waking up when the last call leaves', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer });
    const sender = new PacedSender(timer);
    sender.attach(scheduler);
    timer.run(100);
    sender.registration?.remove();
    const wakeups = scheduler.wakeupCount;
    timer.run(1000);
    expect(scheduler.wakeupCount).toBe(wakeups);
    expect(scheduler.participants).toBe(0);
  });
});

describe('when pacing on the real clock for 3 s', () => {
  // Shares 2 cores with other test runs: retried rather than loosened.
  it(
    'should keep frames on the 20 ms grid without accumulating lateness',
    { retry: 2 },
    async () => {
      const timer = new MonotonicMediaTimer();
      const scheduler = new PlayoutScheduler({ timer });
      const sender = new PacedSender(timer);
      sender.playout.enqueue(
        'item_a',
        Array.from({ length: 150 }, () => Buffer.alloc(160)),
      );
      sender.attach(scheduler);
      await new Promise((resolve) => setTimeout(resolve, 3100));
      sender.registration?.remove();
      expect(sender.sent.length).toBeGreaterThanOrEqual(148);
      const inOrder = sender.sent.map((s) => s.atMs - s.dueMs);
      const median = (values: number[]) =>
        [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
      // Other engineers' tests share the 2 cores, so single frames may be late; the typical frame
      // is on time, and lateness does not grow: the last second is no later than the first.
      expect(median(inOrder)).toBeLessThan(3);
      expect(median(inOrder.slice(-50)) - median(inOrder.slice(0, 50))).toBeLessThan(3);
      const first = sender.sent[0] as Sent;
      const last = sender.sent[sender.sent.length - 1] as Sent;
      expect(Math.abs(last.dueMs - first.dueMs - (last.index - first.index) * 20)).toBeLessThan(
        1e-6,
      );
    },
  );
});

describe('when one wake-up runs several calls', () => {
  it('should tick every call of the wake-up before flushing any, and flush each once', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, slots: 1 });
    const log: string[] = [];
    const calls = ['a', 'b', 'c'].map((name) => ({
      tick: () => log.push(`tick ${name}`),
      flush: () => log.push(`flush ${name}`),
    }));
    for (const call of calls) scheduler.add(call);
    timer.run(20);
    const firstWake = log.slice(0, 6);
    expect(firstWake).toEqual(['tick a', 'tick b', 'tick c', 'flush a', 'flush b', 'flush c']);
    expect(log.filter((entry) => entry.startsWith('flush')).length).toBe(
      log.filter((entry) => entry.startsWith('tick')).length,
    );
  });

  it('should write every call of the wake-up before any call does its receive-side work', () => {
    const timer = new FakeMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, slots: 1 });
    const log: string[] = [];
    const calls = ['a', 'b', 'c'].map((name) => ({
      tick: () => log.push(`tick ${name}`),
      flush: () => log.push(`flush ${name}`),
      afterFlush: () => log.push(`after ${name}`),
    }));
    for (const call of calls) scheduler.add(call);
    timer.run(20);
    expect(log.slice(0, 9)).toEqual([
      'tick a',
      'tick b',
      'tick c',
      'flush a',
      'flush b',
      'flush c',
      'after a',
      'after b',
      'after c',
    ]);
  });
});
