import type { MediaTimer, MediaTimerHandle } from '../../../gateway/media/media-timer.ts';

/**
 * A controllable clock for the media layer. `run(untilMs)` fires due callbacks in time order;
 * `lateness` decides how late each wake-up lands, to model a busy event loop.
 */
export class FakeMediaTimer implements MediaTimer {
  private current = 0;
  private nextId = 1;
  private readonly pending = new Map<number, { at: number; callback: () => void }>();
  lateness: (dueMs: number) => number = () => 0;

  now(): number {
    return this.current;
  }

  schedule(callback: () => void, delayMs: number): MediaTimerHandle {
    const id = this.nextId++;
    const at = this.current + Math.max(0, delayMs);
    this.pending.set(id, { at: at + Math.max(0, this.lateness(at)), callback });
    return { id };
  }

  cancel(handle: MediaTimerHandle): void {
    this.pending.delete(handle.id);
  }

  advance(ms: number): void {
    this.run(this.current + ms);
  }

  run(untilMs: number): void {
    for (;;) {
      let nextId: number | undefined;
      let nextAt = Infinity;
      for (const [id, entry] of this.pending) {
        if (entry.at < nextAt) {
          nextAt = entry.at;
          nextId = id;
        }
      }
      if (nextId === undefined || nextAt > untilMs) break;
      const entry = this.pending.get(nextId);
      this.pending.delete(nextId);
      this.current = Math.max(this.current, nextAt);
      entry?.callback();
    }
    this.current = Math.max(this.current, untilMs);
  }
}
