/**
 * The call's side of result delivery: the ConversationPort that speaks a result as one response
 * and resolves on that response's playout outcome (see SpokenResponse), and the results being
 * spoken right now, which the call's model and media events drive (created, queued, sent, done,
 * cut, finished).
 */
import type { Clock, ClockHandle } from '../../config/clock.ts';
import type { ConversationPort, SpokenOutcome } from '../../agents/result-delivery.ts';
import type { PlayoutClearResult } from '../media/playout.ts';
import type { RealtimeSession } from '../realtime/realtime-session.ts';
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
}

export class DeliveryPort {
  /** Results being spoken, each a response from its request to the last packet played (or its cut). */
  private readonly speaking: SpokenResponse[] = [];
  private seq = 0;
  /** The response to speak the reads answered in tool outputs sent to this model session, until it is created. */
  private toolOutputSpeech: SpokenResponse | undefined;

  constructor(private readonly host: DeliveryPortHost) {}

  /** How many results are being spoken now (a renewal waits for none). */
  get count(): number {
    return this.speaking.length;
  }

  /** The result whose request carried `tag` and whose response has not been created yet. */
  awaitingResponse(tag: string | undefined): SpokenResponse | undefined {
    return tag === undefined
      ? undefined
      : this.speaking.find((spoken) => spoken.tag === tag && spoken.responseId === undefined);
  }

  /**
   * A response was created: the one a result's request asked for (by its tag), or, untagged, the
   * one that speaks the tool outputs sent before it.
   */
  responseCreated(tag: string | undefined, responseId: string): void {
    if (tag !== undefined) {
      this.awaitingResponse(tag)?.created(responseId);
      return;
    }
    this.toolOutputSpeech?.created(responseId);
    this.toolOutputSpeech = undefined;
  }

  /**
   * The response that will speak a read answered in a tool output: the session's next untagged
   * response, shared by every output sent before it is created.
   */
  toolOutputResponse(operationId: string): SpokenResponse {
    if (this.toolOutputSpeech !== undefined) return this.toolOutputSpeech;
    const { host } = this;
    const spoken = new SpokenResponse({
      operationId,
      tag: `tool_output:${++this.seq}`,
      now: () => host.clock.epochMs(),
    });
    this.speaking.push(spoken);
    this.toolOutputSpeech = spoken;
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
      if (this.toolOutputSpeech === spoken) this.toolOutputSpeech = undefined;
      const index = this.speaking.indexOf(spoken);
      if (index >= 0) this.speaking.splice(index, 1);
    });
    return spoken;
  }

  byResponse(responseId: string): SpokenResponse | undefined {
    return this.speaking.find((spoken) => spoken.responseId === responseId);
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
    this.toolOutputSpeech = undefined;
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
    const spoken = new SpokenResponse({
      operationId,
      tag: `deliver:${operationId}:${++this.seq}`,
      now: () => host.clock.epochMs(),
    });
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
    model.addSystemMessage(message);
    model.createResponse({ tag: spoken.tag });
    const result = await spoken.outcome;
    host.clock.cancel(timer);
    const index = this.speaking.indexOf(spoken);
    if (index >= 0) this.speaking.splice(index, 1);
    host.settled(operationId, result);
    return result;
  }
}
