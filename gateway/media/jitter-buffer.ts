/**
 * Receive-side jitter buffer, pure: packets go in with their arrival time, one frame comes out
 * per 20 ms tick. It reorders by sequence number, drops duplicates and packets that arrive after
 * their playout slot, conceals a single lost frame when given a concealer, and adapts its depth
 * to the measured interarrival jitter within [minDepthMs, maxDepthMs]. No timers: the caller owns
 * the clock and the tick.
 *
 * When it runs dry, the first packet to come after tells why. The next sequence number with a
 * marker, or with a timestamp that skipped the silence (VAD, DTX): a new talk spurt, which plays
 * at the normal depth. A sequence number beyond the next: the ones between were lost, and playout
 * goes on from the packet that came, so a lost burst costs no delay. Only the next sequence number
 * with its timestamp in step was late, and the buffer deepens for it, as it does for a packet that
 * comes after its slot was played, concealed or skipped. A pause is not jitter.
 */
import { FRAME_MS } from './audio-format.ts';
import { PayloadStore } from './payload-store.ts';

export interface JitterBufferOptions {
  readonly minDepthMs: number;
  readonly maxDepthMs: number;
  /** RTP clock rate, to compare timestamps with arrival times. */
  readonly clockRate: number;
  /** Makes a stand-in for one lost frame from the frame before it (G.711); none: losses are gaps. */
  readonly conceal?: (previous: Buffer) => Buffer;
  /**
   * How the buffer gets shallower when it is deeper than its target: `discard` (the default) drops
   * the oldest frame, as a player that runs in real time must; `play` hands it out early through
   * popSurplus(), for a consumer that takes audio faster than real time (a speech model buffers
   * it), so that nothing the caller said is lost to a burst.
   */
  readonly shrink?: 'discard' | 'play';
}

export interface JitterPacket {
  readonly sequenceNumber: number;
  readonly timestamp: number;
  readonly payload: Buffer;
  /** The RTP marker bit: the first packet of a talk spurt (RFC 3551 §4.1). */
  readonly marker?: boolean;
  /**
   * Holds a sequence number without audio (a telephone-event packet in the same stream), so the
   * gap it leaves in the audio is not taken for loss.
   */
  readonly filler?: boolean;
}

export type JitterPushResult = 'buffered' | 'duplicate' | 'late' | 'jump-pending' | 'resynced';

export type JitterFrame =
  | {
      readonly kind: 'frame';
      readonly payload: Buffer;
      readonly sequenceNumber: number;
      readonly filler: boolean;
    }
  | { readonly kind: 'concealed'; readonly payload: Buffer }
  /** A frame was lost and could not be concealed; the consumer plays nothing for 20 ms. */
  | { readonly kind: 'lost' }
  /** Filling up to the target depth (start of stream or after an underrun). */
  | { readonly kind: 'buffering' }
  /**
   * Playing, and the next frame has not arrived: the buffer ran dry (the end of a talk spurt, a
   * loss or a late packet; only the last counts in `underruns`).
   */
  | { readonly kind: 'underrun' };

type PlayedFrame = Extract<JitterFrame, { kind: 'frame' }>;

/** Frames without data are shared constants: a tick that plays nothing allocates nothing. */
const BUFFERING: JitterFrame = { kind: 'buffering' };
const UNDERRUN: JitterFrame = { kind: 'underrun' };
const LOST: JitterFrame = { kind: 'lost' };

export interface JitterBufferStats {
  readonly buffered: number;
  readonly played: number;
  readonly duplicates: number;
  /** Packets that came after their slot was played, concealed or skipped. */
  readonly late: number;
  /** Slots played out or skipped with no packet: the sequence numbers not received in time. */
  readonly lost: number;
  readonly concealed: number;
  /** Frames dropped to shrink the buffer (overflow or a depth above target). */
  readonly discarded: number;
  /** Frames handed out ahead of their slot to shrink the buffer (shrink: 'play'). */
  readonly hurried: number;
  /** Times the buffer ran dry because the next packet came late (not pauses, not losses). */
  readonly underruns: number;
  readonly resyncs: number;
  /** RFC 3550 interarrival jitter, in milliseconds. */
  readonly jitterMs: number;
  readonly targetDepthMs: number;
}

/**
 * A sequence jump larger than this many packets is a new stream (a sender restart or a media
 * switch), not loss: it must be confirmed by the next packet before the buffer follows it.
 * 100 packets = 2 s at 20 ms, far beyond any sane jitter depth (maxDepthMs is at most seconds).
 */
const MAX_SEQUENCE_JUMP = 100;
/** The RFC 3550 jitter estimator gain (1/16): smooths noise while following real changes. */
const JITTER_GAIN = 1 / 16;
/** Target depth in multiples of the jitter estimate: covers the tail of typical delay spread. */
const JITTER_DEPTH_FACTOR = 3;
/** Frames of slack above the target before the buffer shrinks, so it does not oscillate. */
const SHRINK_SLACK_FRAMES = 2;
/** At most one frame is dropped to shrink the buffer per this many ticks: one click per second. */
const SHRINK_INTERVAL_TICKS = 50;
/** Clean ticks after which the extra depth added by a late packet is taken back (10 s). */
const LATENESS_BOOST_DECAY_TICKS = 500;
/** Played sequence numbers remembered to tell a duplicate from a late packet. */
const PLAYED_MEMORY = 64;

export class JitterBuffer {
  private readonly options: JitterBufferOptions;
  private readonly minFrames: number;
  private readonly maxFrames: number;
  private readonly entries: SequenceRing;
  /** Arrival time of the packet that restarted buffering: what has waited longest. */
  private bufferingSinceMs: number | undefined;
  private state: 'idle' | 'buffering' | 'playing' = 'idle';
  /** Ran dry while playing, and no packet at or past the playout point has come since. */
  private dry = false;
  /**
   * The slot it ran dry at, until playout goes on: a packet from there up, skipped as lost when a
   * later one came first, still plays if it comes before playout goes on (reordered).
   */
  private resumeFrom: number | undefined;
  /** RTP timestamp of the last packet before it ran dry. */
  private resumeTimestamp = 0;
  /** Extended (unwrapped) sequence number of the next frame to play. */
  private next = 0;
  private highest = 0;
  /** RTP timestamp of the packet numbered `highest`. */
  private highestTimestamp = 0;
  /** RTP timestamp units in one frame: a packet's worth when none was skipped. */
  private readonly frameTimestampUnits: number;
  /** Ring of recently played extended sequence numbers, indexed by number modulo its size. */
  private readonly played = new Float64Array(PLAYED_MEMORY).fill(-1);
  private pendingJump: { extended: number; packet: JitterPacket } | undefined;
  private previousPayload: Buffer | undefined;
  private previousWasReal = false;
  private hasPlayed = false;
  private lastTransit: number | undefined;
  private jitter = 0;
  private latenessBoostFrames = 0;
  private cleanTicks = 0;
  private ticksSinceShrink = 0;
  /** A shrink came due in 'play' mode: popSurplus() hands out the oldest frame. */
  private surplusDue = false;
  private counts = {
    buffered: 0,
    played: 0,
    duplicates: 0,
    late: 0,
    lost: 0,
    concealed: 0,
    discarded: 0,
    hurried: 0,
    underruns: 0,
    resyncs: 0,
  };

  constructor(options: JitterBufferOptions) {
    this.options = options;
    this.minFrames = Math.max(1, Math.ceil(options.minDepthMs / FRAME_MS));
    this.maxFrames = Math.max(this.minFrames, Math.floor(options.maxDepthMs / FRAME_MS));
    this.frameTimestampUnits = (options.clockRate * FRAME_MS) / 1000;
    // Everything held lies within the window [next, highest]: at most maxFrames + slack frames,
    // plus a jump not yet confirmed. Twice that, so two entries never share a slot. At most
    // maxFrames + slack entries are held at once (one more while an insert overflows), which is
    // what the payload store holds without growing.
    this.entries = new SequenceRing(
      2 * (this.maxFrames + SHRINK_SLACK_FRAMES + MAX_SEQUENCE_JUMP + 1),
      this.maxFrames + SHRINK_SLACK_FRAMES + 2,
    );
  }

  push(packet: JitterPacket, nowMs: number): JitterPushResult {
    if (this.state === 'idle') {
      this.restart(packet.sequenceNumber);
      return this.insert(packet.sequenceNumber, packet, nowMs);
    }
    const extended = this.extend(packet.sequenceNumber);
    if (Math.abs(extended - this.highest) > MAX_SEQUENCE_JUMP) {
      const pending = this.pendingJump;
      if (pending && extended === pending.extended + 1) {
        // Two consecutive packets agree on the new numbering: follow it.
        this.counts.resyncs++;
        this.restart(pending.packet.sequenceNumber);
        this.insert(pending.packet.sequenceNumber, pending.packet, nowMs);
        this.insert(this.extend(packet.sequenceNumber), packet, nowMs);
        this.pendingJump = undefined;
        return 'resynced';
      }
      this.pendingJump = { extended, packet };
      return 'jump-pending';
    }
    this.pendingJump = undefined;
    if (extended < this.next) {
      if (this.played[ringIndex(extended)] === extended) {
        this.counts.duplicates++;
        return 'duplicate';
      }
      if (!this.hasPlayed) {
        // Reordered before playout began: widen the start instead of dropping it.
        this.next = extended;
        return this.insert(extended, packet, nowMs);
      }
      if (this.resumeFrom !== undefined && extended >= this.resumeFrom) {
        // Reordered behind the first packet after a pause or a loss, and playout has not gone on.
        this.counts.lost -= this.next - extended;
        this.next = extended;
        if (extended === this.resumeFrom) this.judgeResume(packet);
        return this.insert(extended, packet, nowMs);
      }
      this.counts.late++;
      this.deepen();
      return 'late';
    }
    if (this.entries.has(extended)) {
      this.counts.duplicates++;
      return 'duplicate';
    }
    if (this.dry) this.resume(extended, packet);
    return this.insert(extended, packet, nowMs);
  }

  /**
   * The frame for this 20 ms tick. With `nowMs`, buffered audio also starts once it has waited the
   * target depth, even if fewer frames came: the end of a talk spurt (or of the call) is played,
   * not held until more audio arrives.
   */
  pop(nowMs?: number): JitterFrame {
    if (this.state === 'idle') return BUFFERING;
    if (this.state === 'buffering') {
      const waited =
        nowMs !== undefined &&
        this.bufferingSinceMs !== undefined &&
        this.entries.size > 0 &&
        nowMs - this.bufferingSinceMs >= this.targetFrames() * FRAME_MS;
      if (this.span() < this.targetFrames() && !waited) return BUFFERING;
      this.state = 'playing';
      this.bufferingSinceMs = undefined;
      this.resumeFrom = undefined;
    }
    this.shrinkIfDeep();
    return this.playNext();
  }

  /**
   * With shrink 'play': when the buffer has been deeper than its target for a shrink's interval,
   * the oldest frame, handed out now on top of this tick's pop() (at most one per interval, like
   * a discard); undefined otherwise.
   */
  popSurplus(): JitterFrame | undefined {
    if (!this.surplusDue) return undefined;
    this.surplusDue = false;
    if (this.state !== 'playing' || this.entries.size === 0) return undefined;
    this.counts.hurried++;
    return this.playNext();
  }

  /** The frame at the playout point, or what stands for it, and the point moves on. */
  private playNext(): JitterFrame {
    const frame = this.entries.take(this.next);
    if (frame) {
      this.advance(true);
      this.counts.played++;
      if (!frame.filler) this.previousPayload = frame.payload;
      this.previousWasReal = !frame.filler;
      this.noteCleanTick();
      return frame;
    }
    if (this.entries.size === 0) {
      // Whether this is lateness, loss or a pause, the next packet tells: resume().
      this.state = 'buffering';
      this.dry = true;
      this.resumeFrom = this.next;
      this.resumeTimestamp = this.highestTimestamp;
      return UNDERRUN;
    }
    this.advance(false);
    this.counts.lost++;
    if (this.options.conceal && this.previousPayload && this.previousWasReal) {
      this.previousWasReal = false;
      this.counts.concealed++;
      return { kind: 'concealed', payload: this.options.conceal(this.previousPayload) };
    }
    this.previousWasReal = false;
    return LOST;
  }

  /** Frames buffered ahead of the playout point, counting gaps. */
  depthFrames(): number {
    return this.entries.size === 0 ? 0 : this.span();
  }

  stats(): JitterBufferStats {
    // Written out: a spread of the counts plus two more fields takes V8's slow clone path (several µs
    // and garbage), and every call reads this once a second.
    const c = this.counts;
    return {
      buffered: c.buffered,
      played: c.played,
      duplicates: c.duplicates,
      late: c.late,
      lost: c.lost,
      concealed: c.concealed,
      discarded: c.discarded,
      hurried: c.hurried,
      underruns: c.underruns,
      resyncs: c.resyncs,
      jitterMs: this.jitter,
      targetDepthMs: this.targetFrames() * FRAME_MS,
    };
  }

  /** Forgets the stream (a new SSRC): the next packet starts a fresh one. */
  reset(): void {
    this.entries.clear();
    this.bufferingSinceMs = undefined;
    this.state = 'idle';
    this.dry = false;
    this.resumeFrom = undefined;
    this.pendingJump = undefined;
    this.lastTransit = undefined;
    this.previousPayload = undefined;
    this.previousWasReal = false;
    this.surplusDue = false;
  }

  private restart(sequenceNumber: number): void {
    this.entries.clear();
    this.surplusDue = false;
    this.played.fill(-1);
    this.next = sequenceNumber;
    this.highest = sequenceNumber;
    this.state = 'buffering';
    this.dry = false;
    this.resumeFrom = undefined;
    this.bufferingSinceMs = undefined;
    this.hasPlayed = false;
    this.lastTransit = undefined;
  }

  private insert(extended: number, packet: JitterPacket, nowMs: number): JitterPushResult {
    this.entries.set(extended, packet);
    if (this.state === 'buffering' && this.bufferingSinceMs === undefined)
      this.bufferingSinceMs = nowMs;
    this.counts.buffered++;
    if (extended >= this.highest) {
      this.highest = extended;
      this.highestTimestamp = packet.timestamp;
    }
    // Event packets repeat their start timestamp: their transit says nothing about jitter.
    if (!packet.filler) this.updateJitter(packet.timestamp, nowMs);
    this.dropOverflow();
    return 'buffered';
  }

  /**
   * The first packet at or past the playout point since the buffer ran dry. Past it: the numbers
   * between were lost; playout goes on from this packet, as it would have had they come, and they
   * count as lost (late if they come after playout went on).
   */
  private resume(extended: number, packet: JitterPacket): void {
    this.dry = false;
    if (extended > this.next) {
      this.counts.lost += extended - this.next;
      this.next = extended;
      return;
    }
    this.judgeResume(packet);
  }

  /**
   * The packet for the slot the buffer ran dry at. A new talk spurt (the marker, or a timestamp
   * that moved on by at least a frame more than the sequence number did: the sender sent nothing
   * while the caller was silent) plays at the normal depth, as does a filler, which has a clock of
   * its own. One in step with the packet before it was late. The timestamp is compared modulo
   * 2^32, so one that went back (a restarted clock) is not taken for lateness either.
   */
  private judgeResume(packet: JitterPacket): void {
    if (packet.filler === true || packet.marker === true) return;
    if ((packet.timestamp - this.resumeTimestamp) >>> 0 >= 2 * this.frameTimestampUnits) return;
    this.counts.underruns++;
    this.deepen();
  }

  /** A packet came too late for its slot: one frame deeper, taken back after clean ticks. */
  private deepen(): void {
    this.cleanTicks = 0;
    if (this.targetFrames() < this.maxFrames) this.latenessBoostFrames++;
  }

  /** Unwraps a 16-bit sequence number to the one nearest the highest seen. */
  private extend(sequenceNumber: number): number {
    const delta = ((sequenceNumber - (this.highest & 0xffff) + 0x8000) & 0xffff) - 0x8000;
    return this.highest + delta;
  }

  private span(): number {
    return this.highest - this.next + 1;
  }

  private targetFrames(): number {
    const fromJitter = Math.ceil((JITTER_DEPTH_FACTOR * this.jitter) / FRAME_MS);
    return Math.min(
      this.maxFrames,
      Math.max(this.minFrames, fromJitter) + this.latenessBoostFrames,
    );
  }

  private updateJitter(timestamp: number, nowMs: number): void {
    // Transit in ms modulo the 32-bit timestamp; only differences matter.
    const transit = nowMs - (timestamp * 1000) / this.options.clockRate;
    if (this.lastTransit !== undefined) {
      let d = Math.abs(transit - this.lastTransit);
      // A timestamp wrap or a talk-spurt gap is not jitter.
      if (d > this.options.maxDepthMs * 4) d = this.jitter;
      this.jitter += (d - this.jitter) * JITTER_GAIN;
    }
    this.lastTransit = transit;
  }

  /** Moves the playout point on; `received` remembers the frame so a copy counts as duplicate. */
  private advance(received: boolean): void {
    if (received) this.played[ringIndex(this.next)] = this.next;
    this.next++;
    this.hasPlayed = true;
  }

  private dropOverflow(): void {
    while (this.span() > this.maxFrames + SHRINK_SLACK_FRAMES) this.discardOldest();
  }

  private shrinkIfDeep(): void {
    this.ticksSinceShrink++;
    if (
      this.span() > this.targetFrames() + SHRINK_SLACK_FRAMES &&
      this.ticksSinceShrink >= SHRINK_INTERVAL_TICKS
    ) {
      if (this.options.shrink === 'play') this.surplusDue = true;
      else this.discardOldest();
      this.ticksSinceShrink = 0;
    }
  }

  private discardOldest(): void {
    const existed = this.entries.delete(this.next);
    if (existed) this.counts.discarded++;
    else this.counts.lost++;
    this.advance(existed);
    // Playout went on past these slots: what comes for them now is late.
    this.resumeFrom = undefined;
  }

  private noteCleanTick(): void {
    this.cleanTicks++;
    if (this.cleanTicks >= LATENESS_BOOST_DECAY_TICKS && this.latenessBoostFrames > 0) {
      this.latenessBoostFrames--;
      this.cleanTicks = 0;
    }
  }
}

/**
 * The buffered packets by extended sequence number: a Map's interface on a ring of slots, since
 * the keys held always lie within a window smaller than the ring (per-packet path: no hashing,
 * no allocation). A packet is kept as numbers and its payload bytes, copied into a PayloadStore,
 * not as the packet object: what the buffer holds then lives in a few long-lived arrays instead of
 * young objects and whole datagrams that every scavenge would copy (50-200 ms of audio per call).
 */
class SequenceRing {
  private readonly keys: Float64Array;
  private readonly sequenceNumbers: Uint16Array;
  private readonly fillers: Uint8Array;
  private readonly payloadLengths: Uint16Array;
  /** Slot in the payload store, or -1 for an empty payload. */
  private readonly payloadSlots: Int32Array;
  private readonly payloads: PayloadStore;
  private readonly mask: number;
  private count = 0;

  constructor(minSlots: number, heldAtOnce: number) {
    let slots = 1;
    while (slots < minSlots) slots *= 2;
    this.keys = new Float64Array(slots).fill(Number.NaN);
    this.sequenceNumbers = new Uint16Array(slots);
    this.fillers = new Uint8Array(slots);
    this.payloadLengths = new Uint16Array(slots);
    this.payloadSlots = new Int32Array(slots).fill(-1);
    this.payloads = new PayloadStore(heldAtOnce);
    this.mask = slots - 1;
  }

  get size(): number {
    return this.count;
  }

  has(key: number): boolean {
    return this.keys[key & this.mask] === key;
  }

  /** The packet's payload is copied: the caller may reuse or drop it. */
  set(key: number, packet: JitterPacket): void {
    const slot = key & this.mask;
    if (Number.isNaN(this.keys[slot])) this.count++;
    else this.releasePayload(slot);
    this.keys[slot] = key;
    this.sequenceNumbers[slot] = packet.sequenceNumber;
    this.fillers[slot] = packet.filler === true ? 1 : 0;
    this.payloadLengths[slot] = packet.payload.length;
    this.payloadSlots[slot] = packet.payload.length === 0 ? -1 : this.payloads.put(packet.payload);
  }

  /** Removes the entry and returns it as a frame, its payload bytes the consumer's to keep (never written again); undefined when absent. */
  take(key: number): PlayedFrame | undefined {
    const slot = key & this.mask;
    if (this.keys[slot] !== key) return undefined;
    const payloadSlot = this.payloadSlots[slot] as number;
    const payload =
      payloadSlot < 0
        ? EMPTY
        : this.payloads.view(payloadSlot, this.payloadLengths[slot] as number);
    const frame: PlayedFrame = {
      kind: 'frame',
      payload,
      sequenceNumber: this.sequenceNumbers[slot] as number,
      filler: this.fillers[slot] === 1,
    };
    this.delete(key);
    return frame;
  }

  delete(key: number): boolean {
    const slot = key & this.mask;
    if (this.keys[slot] !== key) return false;
    this.releasePayload(slot);
    this.keys[slot] = Number.NaN;
    this.count--;
    return true;
  }

  clear(): void {
    if (this.count === 0) return;
    this.keys.fill(Number.NaN);
    this.payloadSlots.fill(-1);
    this.payloads.clear();
    this.count = 0;
  }

  private releasePayload(slot: number): void {
    const payloadSlot = this.payloadSlots[slot] as number;
    if (payloadSlot >= 0) this.payloads.release(payloadSlot);
    this.payloadSlots[slot] = -1;
  }
}

const EMPTY = Buffer.alloc(0);
/** Extended sequence numbers can go below 0 (reordering at the very start of a stream). */
function ringIndex(extended: number): number {
  return ((extended % PLAYED_MEMORY) + PLAYED_MEMORY) % PLAYED_MEMORY;
}
