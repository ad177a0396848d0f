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
 * A process stalled longer than this (GC, a blocked event loop) does not burst out the backlog:
 * the schedule moves on and the missed frames are skipped. 3 frames is what a receiver's jitter
 * buffer absorbs; more would arrive as a burst it has to drop anyway.
 */
export const MAX_CATCH_UP_FRAMES = 3;

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
  private nextIndex = 0;
  private skipped = 0;

  constructor(options: FrameScheduleOptions) {
    this.startMs = options.startMs;
    this.frameMs = options.frameMs ?? FRAME_MS;
  }

  /** Frames due by `nowMs`, oldest first; each is returned once. */
  due(nowMs: number): DueFrame[] {
    const lastDue = Math.floor((nowMs + EARLY_SEND_TOLERANCE_MS - this.startMs) / this.frameMs);
    if (lastDue < this.nextIndex) return [];
    if (lastDue - this.nextIndex + 1 > MAX_CATCH_UP_FRAMES) {
      const first = lastDue - MAX_CATCH_UP_FRAMES + 1;
      this.skipped += first - this.nextIndex;
      this.nextIndex = first;
    }
    const frames: DueFrame[] = [];
    for (let index = this.nextIndex; index <= lastDue; index++) {
      const dueMs = this.startMs + index * this.frameMs;
      frames.push({ index, dueMs, latenessMs: Math.max(0, nowMs - dueMs) });
    }
    this.nextIndex = lastDue + 1;
    return frames;
  }

  /** Frames never sent because the process stalled past MAX_CATCH_UP_FRAMES. */
  get skippedFrames(): number {
    return this.skipped;
  }

  /** When the next frame is due. */
  get nextDueMs(): number {
    return this.startMs + this.nextIndex * this.frameMs;
  }
}
