/**
 * When each 20 ms frame is due, pure: frame n is due at start + n * 20 ms. Computing every due
 * time from the start (instead of "20 ms after the last send") is what keeps lateness from
 * accumulating: a late wake-up delays one frame, not all that follow.
 */
import { FRAME_MS } from './audio-format.ts';

/**
 * Timers fire on whole milliseconds, so a wake-up can land a fraction of a millisecond before a
 * frame's due time; sending that early is harmless and saves a wake-up.
 */
export const EARLY_SEND_TOLERANCE_MS = 1;
/**
 * Frames sent per tick at most while catching up after a stall (a GC pause, a busy event loop):
 * the backlog drains at two extra frames per 20 ms instead of leaving as one burst. 3 frames is
 * what a receiver's jitter buffer absorbs comfortably.
 */
export const MAX_CATCH_UP_FRAMES = 3;
/**
 * A backlog beyond this (200 ms) is not caught up: the schedule jumps ahead and those frames are
 * skipped (the audio is delayed, not lost, and the RTP timestamp jumps like after a silence).
 * Catching up more would keep the caller hearing the model late for seconds.
 */
export const MAX_BACKLOG_FRAMES = 10;

export interface DueFrame {
  /** Frame number since the start: RTP timestamps advance by one frame per index. */
  readonly index: number;
  readonly dueMs: number;
  /** How late the frame is going out (0 when on time or early). */
  readonly latenessMs: number;
}

export interface FrameScheduleOptions {
  readonly startMs: number;
  readonly frameMs?: number;
}

export class FrameSchedule {
  private readonly startMs: number;
  private readonly frameMs: number;
  private next = 0;
  private skipped = 0;
  private first = 0;

  constructor(options: FrameScheduleOptions) {
    this.startMs = options.startMs;
    this.frameMs = options.frameMs ?? FRAME_MS;
  }

  /** Frames to send by `nowMs`, oldest first; each is returned once. */
  due(nowMs: number): DueFrame[] {
    const count = this.takeDue(nowMs);
    const frames: DueFrame[] = [];
    for (let index = this.first; index < this.first + count; index++) {
      const dueMs = this.dueMsOf(index);
      frames.push({ index, dueMs, latenessMs: Math.max(0, nowMs - dueMs) });
    }
    return frames;
  }

  /**
   * The allocation-free form of `due()` for the per-call tick: how many frames are due by
   * `nowMs`; they are `firstDueIndex` onwards, each due at `dueMsOf(index)`.
   */
  takeDue(nowMs: number): number {
    const lastDue = Math.floor((nowMs + EARLY_SEND_TOLERANCE_MS - this.startMs) / this.frameMs);
    if (lastDue < this.next) return 0;
    if (lastDue - this.next + 1 > MAX_BACKLOG_FRAMES) {
      const first = lastDue - MAX_CATCH_UP_FRAMES + 1;
      this.skipped += first - this.next;
      this.next = first;
    }
    const last = Math.min(lastDue, this.next + MAX_CATCH_UP_FRAMES - 1);
    this.first = this.next;
    this.next = last + 1;
    return last - this.first + 1;
  }

  /** First frame index of the last `takeDue()`. */
  get firstDueIndex(): number {
    return this.first;
  }

  dueMsOf(index: number): number {
    return this.startMs + index * this.frameMs;
  }

  /** Frames never sent because the process stalled past MAX_BACKLOG_FRAMES. */
  get skippedFrames(): number {
    return this.skipped;
  }

  /** Index of the next frame to send. */
  get nextIndex(): number {
    return this.next;
  }

  /** When the next frame is due. */
  get nextDueMs(): number {
    return this.startMs + this.next * this.frameMs;
  }
}
