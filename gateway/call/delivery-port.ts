/**
 * The call's side of result delivery: the ConversationPort that speaks a result as one response
 * and resolves on that response's playout outcome (see SpokenResponse), and the results being
 * spoken right now. Each is bound to the handle the model session gave for its response (created,
 * or refused); the call's model and media events drive the rest by response and item id (queued,
 * sent, done, cut, finished).
 */
import type { Clock, ClockHandle } from '../../config/clock.ts';
import type { ConversationPort, SpokenOutcome } from '../../agents/result-delivery.ts';
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
    const { host } = this;
    const spoken = new SpokenResponse({ operationId, handle, now: () => host.clock.epochMs() });
    this.speaking.push(spoken);
    // As for a spoken result: a hold only delays the playout, so the bound starts again.
    let timer: ClockHandle;
    const expire = (): void => {
      if (host.callerOnHold() && !host.ending())
        timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
      else spoken.fail();
    };
    timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
    void spoken.outcome.then(() => {
      host.clock.cancel(timer);
      const index = this.speaking.indexOf(spoken);
      if (index >= 0) this.speaking.splice(index, 1);
    });
    return spoken;
  }

  /** Audio of an item of a response went to the playout. */
  queued(responseId: string, itemId: string): void {
    for (const spoken of this.speaking) if (spoken.responseId === responseId) spoken.queued(itemId);
  }

  /** A response is over on the model's side (see SpokenResponse.done). */
  done(responseId: string, status: SpokenOutcome['status']): void {
    for (const spoken of [...this.speaking])
      if (spoken.responseId === responseId) spoken.done(status);
  }

  /** The first packet of an item went out. */
  itemSent(itemId: string): void {
    for (const spoken of this.speaking) spoken.sent(itemId);
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
    for (const spoken of failed) spoken.fail();
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
    const spoken = new SpokenResponse({ operationId, handle, now: () => host.clock.epochMs() });
    this.speaking.push(spoken);
    // A hold only delays the playout (the audio waits for the resume): the bound starts again
    // (test/unit/call/call-races.test.ts, "hold then resume").
    let timer: ClockHandle;
    const expire = (): void => {
      if (host.callerOnHold() && !host.ending())
        timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
      else spoken.fail();
    };
    timer = host.clock.schedule(expire, DELIVERY_TIMEOUT_MS);
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
    host.clock.cancel(timer);
    const index = this.speaking.indexOf(spoken);
    if (index >= 0) this.speaking.splice(index, 1);
    host.settled(operationId, result);
    return result;
  }
}
