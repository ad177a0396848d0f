/**
 * The clock and timers of the call and of result delivery, behind one interface so races can be
 * unit tests driven by a manual clock (test/unit/call/). Same shape as gateway/media's MediaTimer
 * (`now`, `schedule`, `cancel`, monotonic), so one fake can drive a call and its media, plus the
 * wall clock that records and ledger times are written in.
 */
import { performance } from 'node:perf_hooks';

export interface ClockHandle {
  readonly id: number;
}

export interface Clock {
  /** Monotonic milliseconds (performance.now): durations and deadlines; never steps. */
  now(): number;
  /** Wall clock, ms since epoch: times recorded on events and compared with the ledger's. */
  epochMs(): number;
  /** Calls `callback` once after `delayMs`. A pending callback does not keep the process alive. */
  schedule(callback: () => void, delayMs: number): ClockHandle;
  cancel(handle: ClockHandle): void;
}

class SystemClock implements Clock {
  private readonly timeouts = new Map<number, NodeJS.Timeout>();
  private nextId = 1;

  now(): number {
    return performance.now();
  }

  epochMs(): number {
    return Date.now();
  }

  schedule(callback: () => void, delayMs: number): ClockHandle {
    const id = this.nextId++;
    const timeout = setTimeout(
      () => {
        this.timeouts.delete(id);
        callback();
      },
      Math.max(0, delayMs),
    );
    timeout.unref();
    this.timeouts.set(id, timeout);
    return { id };
  }

  cancel(handle: ClockHandle): void {
    const timeout = this.timeouts.get(handle.id);
    if (timeout !== undefined) clearTimeout(timeout);
    this.timeouts.delete(handle.id);
  }
}

/** The process's own clock and timers. */
export const systemClock: Clock = new SystemClock();

/** Resolves after `ms` on `clock` (never keeps the process alive). */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.schedule(resolve, ms));
}
