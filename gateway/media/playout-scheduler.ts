/**
 * One timer for the send side of every call in the process. Each call gets a send slot inside
 * the 20 ms frame and the scheduler wakes once per occupied slot, so 1,000 calls are sent as ten
 * bursts of 100 spread over each frame instead of one burst of 1,000 per tick, which is what keeps
 * playout lateness low under load. Slots fill up to a capacity before the next one opens (spread
 * over the frame), because every wake-up has a fixed cost: a few calls share one wake-up.
 * Wake-ups are computed from the start time (epoch + k * slot), never chained from the previous
 * wake-up, so timer lateness never adds up. A wake-up runs in three passes over its calls: prepare
 * what is due (tick), write it (flush), then everything that is not on the wire (afterFlush), so
 * the last call's packet leaves after the others' writes but not after their receive-side work.
 */
import { FRAME_MS } from './audio-format.ts';
import { EARLY_SEND_TOLERANCE_MS } from './frame-schedule.ts';
import type { MediaTimer, MediaTimerHandle } from './media-timer.ts';

/**
 * Slots per 20 ms frame: 10 slots of 2 ms. Finer slots spread load more evenly but cost more
 * wake-ups (500/s at 10), and Node timers resolve only whole milliseconds anyway.
 */
export const DEFAULT_SEND_SLOTS = 10;
/**
 * Work per slot before the next slot opens, in units of one PCMU passthrough call (a send and a
 * receive, 10-20 µs): 100 units are a burst of 1-2 ms, well inside the lateness budget. A timer
 * wake-up costs 50-120 µs of CPU on a VM (measured here), so opening a slot for a handful of calls
 * would waste more than it spreads. Transcoding calls weigh more (see RtpSession). Above
 * slots * capacity, slots are shared least-loaded first.
 */
export const DEFAULT_SLOT_CAPACITY = 100;

export interface PlayoutParticipant {
  /** Called once per frame period at the participant's slot; prepares whatever is due by `nowMs`. */
  tick(nowMs: number): void;
  /**
   * Sends what tick() prepared. A wake-up ticks all its participants first and flushes them after,
   * so its socket writes go out back to back: the receiving side is woken once per burst instead of
   * once per call, and the ticks' work runs without a system call between every two calls.
   */
  flush?(): void;
  /**
   * Work of the period that does not go on the wire (the receive side, reports, metrics). Runs
   * after every participant of the wake-up has flushed, so no call's write waits for it.
   */
  afterFlush?(): void;
}

export interface PlayoutSchedulerOptions {
  readonly timer: MediaTimer;
  readonly slots?: number;
  readonly slotCapacity?: number;
  /** Called when a participant's tick throws, so one broken call cannot stop the others. */
  readonly onError?: (error: unknown) => void;
}

export interface PlayoutRegistration {
  /** The participant's first slot time: its frame schedule starts here. */
  readonly startMs: number;
  readonly slot: number;
  /** The participant's work changed (a codec switch): its slot keeps it, the slot's load follows. */
  setWeight(weight: number): void;
  remove(): void;
}

export class PlayoutScheduler {
  private readonly timer: MediaTimer;
  private readonly slotCount: number;
  private readonly slotMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly slots: Array<Set<PlayoutParticipant>>;
  /** Sum of the weights in each slot. */
  private readonly slotLoads: number[];
  private readonly slotCapacity: number;
  /** Slots in the order they open: each new one as far as possible from those already open. */
  private readonly fillOrder: number[];
  private epoch = 0;
  /** Index (since epoch) of the next slot wake-up to process. */
  private nextStep = 0;
  private handle: MediaTimerHandle | undefined;
  private size = 0;
  private wakeups = 0;
  /** Participants of the current wake-up to flush (kept, so a wake-up allocates nothing). */
  private readonly ticked: PlayoutParticipant[] = [];

  constructor(options: PlayoutSchedulerOptions) {
    this.timer = options.timer;
    this.slotCount = options.slots ?? DEFAULT_SEND_SLOTS;
    this.slotMs = FRAME_MS / this.slotCount;
    this.onError = options.onError ?? (() => {});
    this.slots = Array.from({ length: this.slotCount }, () => new Set<PlayoutParticipant>());
    this.slotLoads = Array.from({ length: this.slotCount }, () => 0);
    this.slotCapacity = options.slotCapacity ?? DEFAULT_SLOT_CAPACITY;
    this.fillOrder = spreadOrder(this.slotCount);
  }

  /** `weight`: the participant's work per tick relative to a PCMU passthrough call (1). */
  add(participant: PlayoutParticipant, weight = 1): PlayoutRegistration {
    if (this.size === 0) {
      this.epoch = this.timer.now();
      this.nextStep = 0;
    }
    const slot = this.chooseSlot(weight);
    (this.slots[slot] as Set<PlayoutParticipant>).add(participant);
    this.slotLoads[slot] = (this.slotLoads[slot] as number) + weight;
    this.size++;
    // The first occurrence of this slot at or after the next step still to run.
    const step =
      this.nextStep + ((slot - (this.nextStep % this.slotCount) + this.slotCount) % this.slotCount);
    const startMs = this.epoch + step * this.slotMs;
    // The new slot may come before the wake-up already armed.
    if (this.handle) this.timer.cancel(this.handle);
    this.arm();
    let removed = false;
    let current = weight;
    return {
      startMs,
      slot,
      setWeight: (next: number) => {
        if (removed) return;
        this.slotLoads[slot] = (this.slotLoads[slot] as number) - current + next;
        current = next;
      },
      remove: () => {
        if (removed) return;
        removed = true;
        (this.slots[slot] as Set<PlayoutParticipant>).delete(participant);
        this.slotLoads[slot] = (this.slotLoads[slot] as number) - current;
        this.size--;
        if (this.size === 0 && this.handle) {
          this.timer.cancel(this.handle);
          this.handle = undefined;
        }
      },
    };
  }

  get participants(): number {
    return this.size;
  }

  /** Timer wake-ups so far (for tests and the benchmark). */
  get wakeupCount(): number {
    return this.wakeups;
  }

  private chooseSlot(weight: number): number {
    for (const slot of this.fillOrder)
      if ((this.slotLoads[slot] as number) + weight <= this.slotCapacity) return slot;
    let least = 0;
    for (let i = 1; i < this.slotCount; i++)
      if ((this.slotLoads[i] as number) < (this.slotLoads[least] as number)) least = i;
    return least;
  }

  /** Sleeps until the next step whose slot has calls; empty slots cost no wake-up. */
  private arm(): void {
    let step = this.nextStep;
    for (
      let k = 0;
      k < this.slotCount &&
      (this.slots[step % this.slotCount] as Set<PlayoutParticipant>).size === 0;
      k++
    )
      step++;
    const dueMs = this.epoch + step * this.slotMs;
    this.handle = this.timer.schedule(() => this.wake(), dueMs - this.timer.now());
  }

  private wake(): void {
    this.handle = undefined;
    this.wakeups++;
    const now = this.timer.now();
    const lastStep = Math.floor((now + EARLY_SEND_TOLERANCE_MS - this.epoch) / this.slotMs);
    // After a stall, each slot runs at most once: the participants' own schedules catch up.
    const firstStep = Math.max(this.nextStep, lastStep - this.slotCount + 1);
    const ticked = this.ticked;
    for (let step = firstStep; step <= lastStep; step++) {
      for (const participant of this.slots[step % this.slotCount] as Set<PlayoutParticipant>) {
        try {
          participant.tick(now);
        } catch (error) {
          this.onError(error);
        }
        if (participant.flush || participant.afterFlush) ticked.push(participant);
      }
    }
    for (const participant of ticked) {
      try {
        participant.flush?.();
      } catch (error) {
        this.onError(error);
      }
    }
    for (const participant of ticked) {
      try {
        participant.afterFlush?.();
      } catch (error) {
        this.onError(error);
      }
    }
    ticked.length = 0;
    this.nextStep = Math.max(this.nextStep, lastStep + 1);
    if (this.size > 0) this.arm();
  }
}

/** 0, 1/2, 1/4, 3/4, 1/8, ... of the frame (van der Corput), as distinct slot numbers. */
function spreadOrder(slotCount: number): number[] {
  const order: number[] = [];
  for (let i = 0; order.length < slotCount && i < 64 * slotCount; i++) {
    let fraction = 0;
    let weight = 0.5;
    for (let bits = i; bits > 0; bits >>= 1, weight /= 2) if (bits & 1) fraction += weight;
    const slot = Math.floor(fraction * slotCount);
    if (!order.includes(slot)) order.push(slot);
  }
  for (let slot = 0; slot < slotCount; slot++) if (!order.includes(slot)) order.push(slot);
  return order;
}
