/**
 * The call's side of result delivery: the ConversationPort that speaks a result as one response
 * and resolves on that response's playout outcome (see SpokenResponse), and the results being
 * spoken right now. Each is bound to the handle the model session gave for its response (created,
 * or refused); the call's model and media events drive the rest by response and item id (queued,
 * sent, done, cut, finished). Once a result's essential end is known (SpokenResponse.essentialEnd),
 * a timer on the call's clock looks at the playout when it is due and tells the result if that much
 * went out, else looks again when the rest can have gone out (a hold pauses the playout).
 */
import type { Clock, ClockHandle } from '../../config/clock.ts';
import type { ConversationPort, SpokenOutcome } from '../../agents/result-delivery.ts';
import { FRAME_MS } from '../media/audio-format.ts';
import type { PlayoutClearResult } from '../media/playout.ts';
import type { RealtimeSession, ResponseHandle } from '../realtime/realtime-session.ts';
import { SpokenResponse } from './spoken-response.ts';

/**
 * How long a spoken result may take from request to its last packet played out. Above the realtime
 * client's RESPONSE_CREATED_TIMEOUT_MS (10 s) plus a long spoken sentence played in real time; past
 * it the result is treated as not heard and delivery says it again when the caller is idle.
 */
export const DELIVERY_TIMEOUT_MS = 45_000;

export interface DeliveryPortHost {
  readonly clock: Clock;
  /** Resolves once a model session serves the call (false: none will). */
  modelReady(): Promise<boolean>;
  /** The model session serving the call now. */
  model(): RealtimeSession | undefined;
  /** The call is ending: nothing more is spoken. */
  ending(): boolean;
  /** The caller holds the call: the playout waits for the resume. */
  callerOnHold(): boolean;
  /** Milliseconds of an item handed to the network so far (RtpSession.playedMs). */
  playedMs(itemId: string): number | undefined;
  /** Cuts what is playing as a barge-in does; the response's late audio is not played. */
  cut(responseId: string | undefined): void;
  /** A result's response settled (told or not). */
  settled(operationId: string, outcome: SpokenOutcome): void;
  /**
   * A result's response will never be created (the model refused or dropped its request): nothing
   * else will say the line is quiet, so delivery looks again shortly.
   */
  offerAgainSoon(): void;
}

export class DeliveryPort {
  /** Results being spoken, each a response from its request to the last packet played (or its cut). */
  private readonly speaking: SpokenResponse[] = [];
  /** The pending look at the playout of each result whose essential end is known. */
  private readonly essentialChecks = new Map<SpokenResponse, ClockHandle>();

  constructor(private readonly host: DeliveryPortHost) {}

  /** How many results are being spoken now (a renewal waits for none). */
  get count(): number {
    return this.speaking.length;
  }

  /**
   * The response that will speak a read answered in a tool output: the one whose handle the
   * session gave for the output, shared by every output that handle answers.
   */
  toolOutputResponse(operationId: string, handle: ResponseHandle): SpokenResponse {
    const shared = this.speaking.find((spoken) => spoken.handle === handle);
    if (shared !== undefined) return shared;
    return this.track(
      new SpokenResponse({ operationId, handle, now: () => this.host.clock.epochMs() }),
    );
  }

  /** `ms` of audio of an item of a response went to the playout. */
  queued(responseId: string, itemId: string, ms: number): void {
    for (const spoken of this.speaking)
      if (spoken.responseId === responseId) spoken.queued(itemId, ms);
  }

  /** A response is over on the model's side (see SpokenResponse.done). */
  done(responseId: string, status: SpokenOutcome['status']): void {
    for (const spoken of [...this.speaking]) {
      if (spoken.responseId !== responseId) continue;
      spoken.done(status);
      this.watchEssentialEnd(spoken);
    }
  }

  /** The first packet of an item went out. */
  itemSent(itemId: string): void {
    for (const spoken of [...this.speaking]) {
      spoken.sent(itemId);
      this.watchEssentialEnd(spoken);
    }
  }

  /** The last packet of an item went out. */
  itemPlayed(itemId: string, sentMs: number): void {
    for (const spoken of [...this.speaking]) spoken.finished(itemId, sentMs);
  }

  /** The playout was cleared: a result whose audio was still queued is cut. */
  interrupted(cleared: PlayoutClearResult | null): void {
    for (const spoken of [...this.speaking]) spoken.interrupted(cleared);
  }

  /** Every result being spoken fails (session left, call ended); returns how many. */
  failAll(): number {
    const failed = this.speaking.splice(0);
    for (const spoken of failed) {
      spoken.fail();
      this.untrack(spoken);
    }
    return failed.length;
  }

  port(): ConversationPort {
    return { deliver: (result, stop) => this.deliver(result.operationId, result.message, stop) };
  }

  private async deliver(
    operationId: string,
    message: string,
    stop: AbortSignal | undefined,
  ): Promise<SpokenOutcome> {
    const { host } = this;
    if (!(await host.modelReady()) || host.ending()) return { status: 'failed' };
    const model = host.model();
    if (model === undefined) return { status: 'failed' };
    if (stop?.aborted === true) return { status: 'cancelled' };
    model.addSystemMessage(message);
    const handle = model.createResponse();
    // A closed session's requests are offered again by the call's own re-open or renewal.
    handle.onRefused((reason) => reason !== 'closed' && host.offerAgainSoon());
    const spoken = this.track(
      new SpokenResponse({ operationId, handle, now: () => host.clock.epochMs() }),
    );
    // Cut as a barge-in cuts (its audio silenced, the playout cleared), and not told.
    stop?.addEventListener(
      'abort',
      () => {
        host.cut(spoken.responseId);
        spoken.cut();
      },
      { once: true },
    );
    const result = await spoken.outcome;
    host.settled(operationId, result);
    return result;
  }

  /**
   * Once its essential end is known, tells the result when that much of its last item went out:
   * looks at the playout now, and again when the rest can have gone out in real time, so a
   * paused playout (hold) only delays it and a look is never later than the essential end by
   * more than a packet (test/unit/call/told-at-essential-end.test.ts).
   */
  private watchEssentialEnd(spoken: SpokenResponse): void {
    if (this.essentialChecks.has(spoken)) return;
    const end = spoken.essentialEnd;
    if (end === undefined) return;
    const { clock } = this.host;
    const look = (): void => {
      this.essentialChecks.delete(spoken);
      const sentMs = this.host.playedMs(end.itemId) ?? 0;
      spoken.progressed(end.itemId, sentMs);
      if (spoken.essentialEnd === undefined) return;
      const dueInMs = Math.max(FRAME_MS, end.atMs - sentMs);
      this.essentialChecks.set(spoken, clock.schedule(look, dueInMs));
    };
    look();
  }

  /** A result is no longer being spoken: it leaves the list and its pending look is dropped. */
  /**
   * Follows a result being spoken until its outcome, which comes within DELIVERY_TIMEOUT_MS. A hold
   * only delays the playout (the audio waits for the resume): the bound starts again
   * (test/unit/call/hold-then-resume.test.ts).
   */
  private track(spoken: SpokenResponse): SpokenResponse {
    const { host } = this;
    this.speaking.push(spoken);
    let timer: ClockHandle;
    const expire = (): void => {
      if (host.callerOnHold() && !host.ending())
        timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
      else spoken.fail();
    };
    timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
    void spoken.outcome.then(() => {
      host.clock.cancel(timer);
      this.untrack(spoken);
    });
    return spoken;
  }

  private untrack(spoken: SpokenResponse): void {
    const index = this.speaking.indexOf(spoken);
    if (index >= 0) this.speaking.splice(index, 1);
    const check = this.essentialChecks.get(spoken);
    if (check !== undefined) this.host.clock.cancel(check);
    this.essentialChecks.delete(spoken);
  }
}
