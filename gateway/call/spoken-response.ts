/**
 * One response asked for to speak a result, from the request to the last packet the caller was
 * sent: created, its items queued and sent, done on the model's side, cut by a barge-in, finished
 * playing. Delivery settles on its playout outcome, not on `response.done`: realtime models stream
 * faster than real time, so most of a confirmation is still queued when the response is done, and
 * a barge-in then leaves the result untold (test/unit/call/spoken-response.test.ts,
 * test/scenarios/barge-in-after-response-done.test.ts).
 *
 * A result is told once its essential part went out: all but the last `TOLD_TAIL_MS` of its last
 * item, known once the model is done (the lengths are final) and that item's first packet went
 * out. A cut before that point leaves it untold; a cut inside the tail does not
 * (test/unit/call/told-at-essential-end.test.ts).
 *
 * It binds to the ResponseHandle of its request: created gives it the response id, a refused
 * request fails it at once. Pure: no I/O and no timers; time comes from the injected clock, and
 * the delivery port says how far the last item has gone out (`progressed`).
 */
import type { SpokenOutcome } from '../../agents/result-delivery.ts';
import type { ResponseHandle } from '../realtime/realtime-session.ts';

/**
 * The end of a spoken result the caller may miss and still have heard it. Speech synthesis ends
 * in trailing silence and breath, so a caller who heard all but the last 200 ms heard the words.
 * Telling the result this much before its last packet lets its record be durable (a replica WAIT
 * included) before the caller hears the end: a gateway killed in those last moments no longer
 * leaves a result heard in full that the ledger says is untold, which another gateway's janitor
 * would then send by SMS (bench/chaos/). Must stay above the record's write and wait (a few ms).
 */
export const TOLD_TAIL_MS = 200;

/** What the caller got of the response so far. */
export type PlayoutProgress =
  /** Nothing of it has gone out yet (not created, not streamed, or queued behind other audio, or held). */
  | { readonly type: 'queued' }
  /** Packets are going out; `heardMs` over all its items. */
  | { readonly type: 'playing'; readonly heardMs: number }
  /** The playout was cleared (barge-in) before its last packet went out. */
  | {
      readonly type: 'interrupted';
      readonly itemId: string;
      readonly atMs: number;
      readonly heardMs: number;
    }
  /** The last packet of every item it streamed went out. */
  | { readonly type: 'finished'; readonly heardMs: number };

/** Where the essential part of a response ends: `atMs` into its last item. */
export interface EssentialEnd {
  readonly itemId: string;
  readonly atMs: number;
}

export interface SpokenResponseOptions {
  readonly operationId: string;
  /** The model's handle of the response asked for to speak it. */
  readonly handle: ResponseHandle;
  /** Wall clock in ms since epoch (compared with the ledger's commit time). */
  readonly now: () => number;
}

interface ItemPlayout {
  /** Milliseconds of its audio queued so far: its length once the response is done. */
  lengthMs: number;
  /** Its first packet went out. */
  started: boolean;
  sentMs: number;
  finished: boolean;
}

export class SpokenResponse {
  readonly operationId: string;
  readonly handle: ResponseHandle;
  /** Resolves once: completed only when the caller was sent its essential part. */
  readonly outcome: Promise<SpokenOutcome>;
  private readonly now: () => number;
  private id: string | undefined;
  /** The response's end on the model's side (response_done, with the call's view of whether it was talked over). */
  private modelStatus: SpokenOutcome['status'] | undefined;
  private readonly items = new Map<string, ItemPlayout>();
  private interruption: { readonly itemId: string; readonly atMs: number } | undefined;
  private firstSentAt: number | undefined;
  private result: SpokenOutcome | undefined;
  private resolveOutcome: (outcome: SpokenOutcome) => void = () => undefined;

  constructor(options: SpokenResponseOptions) {
    this.operationId = options.operationId;
    this.handle = options.handle;
    this.now = options.now;
    this.outcome = new Promise((resolve) => (this.resolveOutcome = resolve));
    options.handle.onCreated((responseId) => (this.id ??= responseId));
    // Never created (refused, timed out, the session closed first): it will not play.
    options.handle.onRefused(() => this.fail());
  }

  get responseId(): string | undefined {
    return this.id;
  }

  /** `ms` of audio of one of its items went to the playout. */
  queued(itemId: string, ms: number): void {
    if (this.result !== undefined) return;
    const item = this.items.get(itemId);
    if (item !== undefined) item.lengthMs += ms;
    else this.items.set(itemId, { lengthMs: ms, started: false, sentMs: 0, finished: false });
  }

  /** The first packet of an item went out: the first audio the caller can hear (commit-to-audible). */
  sent(itemId: string): void {
    const item = this.items.get(itemId);
    if (item === undefined) return;
    item.started = true;
    this.firstSentAt ??= this.now();
  }

  /**
   * Where its essential part ends, once that can be known: the model is done with it as completed
   * and the first packet of its last item went out. Undefined before, and once it has settled or
   * been cut. Its last item's first packet plus `atMs` is the essential end on the call's clock.
   */
  get essentialEnd(): EssentialEnd | undefined {
    if (this.result !== undefined || this.interruption !== undefined) return undefined;
    if (this.modelStatus !== 'completed') return undefined;
    const last = [...this.items.entries()].at(-1);
    if (last === undefined || !last[1].started) return undefined;
    return { itemId: last[0], atMs: Math.max(0, last[1].lengthMs - TOLD_TAIL_MS) };
  }

  /** `sentMs` of an item have gone out: told once that covers its essential part. */
  progressed(itemId: string, sentMs: number): void {
    const item = this.items.get(itemId);
    if (item === undefined || item.finished || this.result !== undefined) return;
    item.sentMs = Math.max(item.sentMs, sentMs);
    const end = this.essentialEnd;
    if (end?.itemId === itemId && item.sentMs >= end.atMs) this.settle('completed');
  }

  /** The last packet of an item went out. */
  finished(itemId: string, sentMs: number): void {
    const item = this.items.get(itemId);
    if (item === undefined) return;
    item.sentMs = sentMs;
    item.finished = true;
    this.settleIfKnown();
  }

  /**
   * The playout was cleared (barge-in): an item of this response not yet sent to its end is cut.
   * `cleared` is the item that was playing and what of it went out; other items of this response
   * keep what they had sent.
   */
  interrupted(cleared: { readonly itemId: string; readonly sentMs: number } | null): void {
    if (this.result !== undefined || this.interruption !== undefined) return;
    if (cleared !== null) {
      const item = this.items.get(cleared.itemId);
      if (item !== undefined && !item.finished) item.sentMs = cleared.sentMs;
    }
    const cut = [...this.items.entries()].find(([, item]) => !item.finished);
    if (cut === undefined) return;
    this.interruption = { itemId: cut[0], atMs: cut[1].sentMs };
    this.settleIfKnown();
  }

  /** The response is over on the model's side; `status` already says `cancelled` when the caller talked over it. */
  done(status: SpokenOutcome['status']): void {
    this.modelStatus ??= status;
    this.settleIfKnown();
  }

  /** The response will not play (session lost or replaced, call ended, timed out). */
  fail(): void {
    this.settle('failed');
  }

  /** Cut by the call itself, whatever played (its result may have been taken over): not told. */
  cut(): void {
    this.settle('cancelled');
  }

  get progress(): PlayoutProgress {
    const heardMs = [...this.items.values()].reduce((sum, item) => sum + item.sentMs, 0);
    if (this.interruption !== undefined)
      return { type: 'interrupted', ...this.interruption, heardMs };
    if (this.modelStatus !== undefined && [...this.items.values()].every((item) => item.finished))
      return { type: 'finished', heardMs };
    return this.firstSentAt === undefined ? { type: 'queued' } : { type: 'playing', heardMs };
  }

  /**
   * Settles once both ends are known: the model's (done) and the caller's (every item sent, or
   * cut; the essential part sent settles it through `progressed`). A response cut before it is
   * done settles at its done, as the model's cancel follows.
   */
  private settleIfKnown(): void {
    if (this.result !== undefined || this.modelStatus === undefined) return;
    if (this.modelStatus !== 'completed') return this.settle(this.modelStatus);
    const progress = this.progress;
    if (progress.type === 'interrupted') return this.settle('cancelled');
    if (progress.type === 'finished') this.settle('completed');
  }

  private settle(status: SpokenOutcome['status']): void {
    if (this.result !== undefined) return;
    const progress = this.progress;
    const heardMs = progress.type === 'queued' ? 0 : progress.heardMs;
    this.result = {
      status,
      ...(this.id !== undefined && { responseId: this.id }),
      ...(this.firstSentAt !== undefined && { firstAudioAt: this.firstSentAt }),
      heardMs,
    };
    this.resolveOutcome(this.result);
  }
}
