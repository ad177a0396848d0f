/**
 * The send-side queue of one call, pure: model output items go in as 20 ms wire frames, one
 * frame comes out per tick. It marks the first frame of each talk spurt, fills gaps with comfort
 * silence or nothing (as configured), and on barge-in drops everything queued at once and says
 * how much of the interrupted item the caller was actually sent.
 */
import { FRAME_MS } from './audio-format.ts';

export interface PlayoutOptions {
  /** Send this payload between talk spurts; none: send no packets (silence suppression). */
  readonly comfortSilence?: Buffer;
}

export type PlayoutFrame =
  | {
      readonly kind: 'audio';
      readonly payload: Buffer;
      /** First frame of a talk spurt (RTP marker bit, RFC 3551 §4.1). */
      readonly marker: boolean;
      readonly itemId: string;
      /** Set on the item's first frame: the caller starts hearing it with this packet. */
      readonly itemStarted: boolean;
      /** Set on the item's last frame: everything it had was sent. */
      readonly itemDone: boolean;
      /** Milliseconds of the item sent so far, this frame included. */
      readonly itemSentMs: number;
    }
  | { readonly kind: 'silence'; readonly payload: Buffer }
  | { readonly kind: 'idle' };

/** Shared: an idle tick allocates nothing. */
const IDLE: PlayoutFrame = { kind: 'idle' };

export interface PlayoutClearResult {
  readonly itemId: string;
  /** Milliseconds of the item handed to the network before the clear. */
  readonly sentMs: number;
  /** Milliseconds of queued audio dropped, over all items. */
  readonly droppedMs: number;
}

/** Where playout is in the item being played (or next to play), read without changing anything. */
export interface PlayoutPosition {
  readonly itemId: string;
  /** Milliseconds of the item handed to the network so far. */
  readonly sentMs: number;
  /** Milliseconds of the item queued and not yet sent. */
  readonly queuedMs: number;
  /** No more audio will come for the item. */
  readonly ended: boolean;
}

export interface PlayoutStats {
  readonly framesSent: number;
  readonly silenceFrames: number;
  /** Ticks where an unfinished item had no audio ready (the model fell behind real time). */
  readonly underruns: number;
  readonly itemsCleared: number;
}

interface Item {
  readonly id: string;
  /** Queued frames as two parallel queues (payload, milliseconds): no object per frame. */
  readonly payloads: Buffer[];
  readonly frameMs: number[];
  ended: boolean;
  sentMs: number;
}

export class Playout {
  private comfortSilence: Buffer | undefined;
  private readonly items: Item[] = [];
  /** Whether the previous tick sent audio; if not, the next audio frame starts a talk spurt. */
  private inSpurt = false;
  private counts = { framesSent: 0, silenceFrames: 0, underruns: 0, itemsCleared: 0 };
  private queued = 0;

  constructor(options: PlayoutOptions = {}) {
    this.comfortSilence = options.comfortSilence;
  }

  /**
   * Queues frames for an item. Frames of a new item id go after every earlier item; `ms` of the
   * last frame of an item may be below 20 when the audio did not fill it.
   */
  enqueue(itemId: string, frames: readonly Buffer[], lastFrameMs: number = FRAME_MS): void {
    // Streaming audio almost always extends the newest item: look there first (hot path).
    const newest = this.items[this.items.length - 1];
    let item =
      newest !== undefined && newest.id === itemId && !newest.ended
        ? newest
        : this.items.find((candidate) => candidate.id === itemId && !candidate.ended);
    if (!item) {
      item = { id: itemId, payloads: [], frameMs: [], ended: false, sentMs: 0 };
      this.items.push(item);
    }
    const last = frames.length - 1;
    this.queued += frames.length;
    for (let i = 0; i <= last; i++) {
      item.payloads.push(frames[i] as Buffer);
      item.frameMs.push(i === last ? lastFrameMs : FRAME_MS);
    }
  }

  /**
   * No more audio will come for the item: once its frames are out it is done. Returns the
   * item's sent milliseconds when it is done already (all sent before the end was known), else null.
   */
  end(itemId: string): number | null {
    const index = this.items.findIndex((candidate) => candidate.id === itemId && !candidate.ended);
    const item = this.items[index];
    if (!item) return null;
    item.ended = true;
    if (item.payloads.length > 0) return null;
    this.items.splice(index, 1);
    return item.sentMs;
  }

  /** The frame for this tick. */
  next(): PlayoutFrame {
    const item = this.items[0];
    const payload = item?.payloads.shift();
    if (item && payload) {
      this.queued--;
      const itemStarted = item.sentMs === 0;
      item.sentMs += item.frameMs.shift() as number;
      const marker = !this.inSpurt;
      this.inSpurt = true;
      const itemDone = item.ended && item.payloads.length === 0;
      if (itemDone) this.items.shift();
      this.counts.framesSent++;
      return {
        kind: 'audio',
        payload,
        marker,
        itemId: item.id,
        itemStarted,
        itemDone,
        itemSentMs: item.sentMs,
      };
    }
    if (item) this.counts.underruns++;
    this.inSpurt = false;
    if (this.comfortSilence) {
      this.counts.silenceFrames++;
      return { kind: 'silence', payload: this.comfortSilence };
    }
    return IDLE;
  }

  /**
   * Barge-in: drops every queued frame of every item at once. Returns the item that was playing
   * (or next to play) with the milliseconds of it already sent, or null when nothing was queued.
   */
  clear(): PlayoutClearResult | null {
    const current = this.items[0];
    if (!current) return null;
    let droppedMs = 0;
    for (const item of this.items) for (const ms of item.frameMs) droppedMs += ms;
    this.items.length = 0;
    this.queued = 0;
    this.counts.itemsCleared++;
    return { itemId: current.id, sentMs: current.sentMs, droppedMs };
  }

  /**
   * The item playing now (or next to play) and how much of it was sent, without clearing
   * anything: what a barge-in would truncate at, read before deciding to clear. Null when idle.
   */
  position(): PlayoutPosition | null {
    const current = this.items[0];
    if (!current) return null;
    let queuedMs = 0;
    for (const ms of current.frameMs) queuedMs += ms;
    return { itemId: current.id, sentMs: current.sentMs, queuedMs, ended: current.ended };
  }

  /** Milliseconds sent of a queued item (not only the first), or null when it is not queued. */
  sentMsOf(itemId: string): number | null {
    for (const item of this.items) if (item.id === itemId) return item.sentMs;
    return null;
  }

  /**
   * Re-encodes every queued frame (the wire codec changed mid-item): frame boundaries, item ids
   * and sent milliseconds stay as they were, so a later clear() still counts right.
   */
  transform(convert: (payload: Buffer) => Buffer): void {
    for (const item of this.items) {
      for (let i = 0; i < item.payloads.length; i++)
        item.payloads[i] = convert(item.payloads[i] as Buffer);
    }
  }

  /** Between talk spurts (comfort silence on): the filler follows the wire codec. */
  setComfortSilence(payload: Buffer | undefined): void {
    this.comfortSilence = payload;
  }

  /** Milliseconds of audio queued and not yet sent. */
  queuedMs(): number {
    let ms = 0;
    for (const item of this.items) for (const frameMs of item.frameMs) ms += frameMs;
    return ms;
  }

  /** Frames queued and not yet sent, over all items. */
  get queuedFrames(): number {
    return this.queued;
  }

  get playing(): boolean {
    return this.items.length > 0;
  }

  stats(): PlayoutStats {
    return { ...this.counts };
  }
}
