/**
 * Keeps a realtime conversation to one active response at a time, and turns a response that
 * dispatched function calls into exactly one follow-up response once it is done and every call
 * has an output (in either order). Pure: no I/O, no timers; the session feeds it protocol facts
 * and it calls `send` for the commands that should go on the wire.
 *
 * Why this exists: a second `response.create` while one is active is refused by the provider
 * (conversation_already_has_active_response), and one follow-up per tool output produces exactly
 * that refusal. The server may also start responses on its own (server VAD), so "active" is what
 * the server says, not only what we asked for.
 */
import type { ResponseRequest, ResponseStatus } from './realtime-session.ts';

export interface ResponseSequencerOptions {
  /** Puts a response.create on the wire; returns its client event id. */
  sendCreate: (request: ResponseRequest) => string;
  /** Puts a response.cancel on the wire. */
  sendCancel: (responseId: string) => void;
  /** Create again after the follow-up of a tool turn is due (the seed's auto-respond). */
  autoRespondToTools?: boolean;
  /** Requests waiting beyond this are refused, so a stuck model cannot grow memory. */
  maxQueued?: number;
  /** A refused create is retried at most this many times before it is dropped. */
  maxAttempts?: number;
}

interface QueuedRequest {
  request: ResponseRequest;
  attempts: number;
}

interface ToolTurn {
  callIds: string[];
  done: boolean;
  status?: ResponseStatus;
}

export type EnqueueResult = 'queued' | 'refused_full';

/** How many tool turns are remembered; older ones are forgotten (their follow-up is long due). */
const MAX_TOOL_TURNS = 32;

export class ResponseSequencer {
  private readonly options: Required<Omit<ResponseSequencerOptions, 'sendCreate' | 'sendCancel'>>;
  private readonly queue: QueuedRequest[] = [];
  /** The response the server is running, or our create that has not been answered yet. */
  private active: { responseId?: string; createEventId?: string; cancelOnCreated?: boolean; foreign?: boolean } | undefined;
  private lastCreate: { eventId: string; queued: QueuedRequest } | undefined;
  private callerSpeaking = false;
  private stopped = false;
  private readonly toolTurns = new Map<string, ToolTurn>();
  private readonly callToResponse = new Map<string, string>();
  private readonly outputs = new Set<string>();

  constructor(private readonly io: ResponseSequencerOptions) {
    this.options = {
      autoRespondToTools: io.autoRespondToTools ?? true,
      maxQueued: io.maxQueued ?? 8,
      maxAttempts: io.maxAttempts ?? 3,
    };
  }

  /** The response id the server is running, if it told us. */
  get activeResponseId(): string | undefined {
    return this.active?.responseId;
  }

  /** True while a response runs or our create awaits its answer. */
  get isActive(): boolean {
    return this.active !== undefined;
  }

  /** True while our create is out and the server has not said which response it started. */
  get awaitingCreated(): boolean {
    return this.active !== undefined && this.active.responseId === undefined;
  }

  get queuedCount(): number {
    return this.queue.length;
  }

  request(request: ResponseRequest): EnqueueResult {
    if (this.queue.length >= this.options.maxQueued) return 'refused_full';
    this.queue.push({ request, attempts: 0 });
    this.pump();
    return 'queued';
  }

  /**
   * A response started. `ours` is false when the provider tagged it as not answering our pending
   * create (the server started one on its own at the same moment): that response is now the
   * active one, and our create stays out to be refused and queued again (onCreateRefused); a
   * cancel asked for our create is not applied to the server's response.
   */
  onResponseCreated(responseId: string, ours = true): void {
    if (!ours && this.active?.createEventId !== undefined) {
      this.active = { responseId, foreign: true };
      return;
    }
    const cancel = this.active?.cancelOnCreated === true;
    this.active = { responseId };
    if (cancel) this.io.sendCancel(responseId);
  }

  onFunctionCall(responseId: string, callId: string): void {
    const turn = this.turn(responseId);
    if (!turn.callIds.includes(callId)) turn.callIds.push(callId);
    this.callToResponse.set(callId, responseId);
  }

  onResponseDone(responseId: string, status: ResponseStatus, callIds: readonly string[]): void {
    if (this.active?.responseId === responseId) {
      // Our create, if one was out, was answered by this response, unless the response was the
      // server's own: then our create's refusal is still to come and puts it back in the queue.
      if (this.active.foreign !== true) this.lastCreate = undefined;
      this.active = undefined;
    }
    for (const callId of callIds) this.onFunctionCall(responseId, callId);
    const turn = this.toolTurns.get(responseId);
    if (turn !== undefined) {
      turn.done = true;
      turn.status = status;
      this.settleTurn(responseId, turn);
    }
    this.pump();
  }

  onToolOutput(callId: string): void {
    const responseId = this.callToResponse.get(callId);
    // An output for a call no tool turn knows (forgotten, or never announced) settles nothing.
    if (responseId === undefined) return;
    this.outputs.add(callId);
    const turn = this.toolTurns.get(responseId);
    if (turn !== undefined) this.settleTurn(responseId, turn);
    this.pump();
  }

  /**
   * The server refused one of our creates because a response is active. The request goes back to
   * the front of the queue and waits for that response to finish; not a failure.
   * Returns the request when it was dropped after too many attempts (it will get no response).
   */
  onCreateRefused(eventId: string): ResponseRequest | undefined {
    if (this.lastCreate?.eventId !== eventId) return undefined;
    const { queued } = this.lastCreate;
    this.lastCreate = undefined;
    if (this.active?.createEventId === eventId) {
      // No response.created reached us for it: the server's active response predates what we saw.
      // Waiting for a done we may never see would stall; the session retries after a short delay.
      // Only these blind refusals count towards dropping the request: one refused because of a
      // response the server started and we saw (the caller spoke, server VAD answered) waits for
      // that response like any other, however often the caller speaks.
      this.active = undefined;
      queued.attempts += 1;
      if (queued.attempts >= this.options.maxAttempts) return queued.request;
    }
    this.queue.unshift(queued);
    return undefined;
  }

  /**
   * The create was never answered (bounded by the session's timer) or was rejected as invalid:
   * stop waiting for it. Returns the request given up on, which will get no response.
   */
  onCreateFailed(eventId: string): ResponseRequest | undefined {
    if (this.lastCreate?.eventId !== eventId) return undefined;
    const dropped = this.lastCreate.queued.request;
    this.lastCreate = undefined;
    if (this.active?.createEventId === eventId) this.active = undefined;
    this.pump();
    return dropped;
  }

  /** The active response went silent (no done within the session's bound): stop waiting for it. */
  onResponseStalled(responseId: string): void {
    if (this.active?.responseId !== responseId) return;
    this.active = undefined;
    this.lastCreate = undefined;
    this.pump();
  }

  /**
   * Cancels what is active. Returns the response a cancel went out for, `deferred` when our create
   * is still unanswered (the cancel goes out once it is created), or undefined when idle.
   */
  cancelActive(): { responseId: string } | { deferred: true } | undefined {
    if (this.active === undefined) return undefined;
    if (this.active.responseId !== undefined) {
      this.io.sendCancel(this.active.responseId);
      return { responseId: this.active.responseId };
    }
    this.active.cancelOnCreated = true;
    return { deferred: true };
  }

  onSpeechStarted(): void {
    this.callerSpeaking = true;
  }

  onSpeechStopped(): void {
    this.callerSpeaking = false;
    this.pump();
  }

  /** Retries a create that was refused without a known active response. */
  retry(): void {
    this.pump();
  }

  /** Disconnected: nothing more goes out and nothing is waiting. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.active = undefined;
    this.lastCreate = undefined;
    this.toolTurns.clear();
    this.callToResponse.clear();
    this.outputs.clear();
  }

  private turn(responseId: string): ToolTurn {
    let turn = this.toolTurns.get(responseId);
    if (turn === undefined) {
      turn = { callIds: [], done: false };
      this.toolTurns.set(responseId, turn);
      if (this.toolTurns.size > MAX_TOOL_TURNS) {
        const oldest = this.toolTurns.keys().next().value;
        if (oldest !== undefined) this.forgetTurn(oldest);
      }
    }
    return turn;
  }

  private settleTurn(responseId: string, turn: ToolTurn): void {
    if (!turn.done || turn.callIds.length === 0) return;
    if (!turn.callIds.every((callId) => this.outputs.has(callId))) return;
    this.forgetTurn(responseId);
    // A cancelled or failed dispatching response is not followed up: the caller barged in, and
    // the next turn's response sees the outputs in the conversation anyway.
    if (turn.status === 'completed' && this.options.autoRespondToTools) {
      this.queue.unshift({ request: {}, attempts: 0 });
    }
  }

  private forgetTurn(responseId: string): void {
    const turn = this.toolTurns.get(responseId);
    this.toolTurns.delete(responseId);
    for (const callId of turn?.callIds ?? []) {
      this.callToResponse.delete(callId);
      this.outputs.delete(callId);
    }
  }

  private pump(): void {
    if (this.stopped || this.active !== undefined || this.callerSpeaking) return;
    const next = this.queue.shift();
    if (next === undefined) return;
    const eventId = this.io.sendCreate(next.request);
    this.active = { createEventId: eventId };
    this.lastCreate = { eventId, queued: next };
  }
}
