/**
 * The single source of truth for which response a realtime conversation is running. Keeps the
 * conversation to one active response at a time, and turns a response that dispatched function
 * calls into exactly one follow-up response once it is done and every call has an output (in
 * either order). It also tracks every running response with its own stall bound, and our create
 * that has no response.created yet with its own timeout. No I/O: the session feeds it protocol
 * facts and it calls the `send*` ports for the commands that should go on the wire; time comes
 * from the injected timer (test/unit/realtime/response-sequencer-timing.test.ts).
 *
 * Why this exists: a second `response.create` while one is active is refused by the provider
 * (conversation_already_has_active_response), and one follow-up per tool output produces exactly
 * that refusal. The server may also start responses on its own (server VAD), so "active" is what
 * the server says, not only what we asked for.
 */
import {
  MonotonicMediaTimer,
  type MediaTimer,
  type MediaTimerHandle,
} from '../media/media-timer.ts';
import type { ResponseRequest, ResponseStatus } from './realtime-session.ts';

/** An unanswered response.create is forgotten after this, so the queue cannot stall forever. */
export const RESPONSE_CREATED_TIMEOUT_MS = 10_000;
/**
 * A response with no server event for this long is given up (its done was lost or the server is
 * stuck), so later responses are not queued forever: it is cancelled and ends as failed. Far
 * above any pause inside a real response, which would otherwise be cut off mid-sentence.
 */
export const RESPONSE_STALL_TIMEOUT_MS = 30_000;
/** A refused create with no response in sight is retried after this (bounded attempts). */
export const REFUSED_CREATE_RETRY_MS = 250;

/** Why a running response stopped being waited for. */
export type GiveUpReason = 'stalled' | 'superseded';

export interface ResponseSequencerOptions {
  /**
   * Puts a response.create on the wire, its metadata carrying `createTag` (so response.created
   * tells our response from one the server started itself); returns its client event id.
   */
  sendCreate: (request: ResponseRequest, createTag: string) => string;
  /** Puts a response.cancel on the wire. */
  sendCancel: (responseId: string) => void;
  /**
   * A running response was given up (after its cancel went out): the call layer is owed the
   * response_done it would have had. The sequencer still counts it active during this call.
   */
  onGiveUp?: (responseId: string, reason: GiveUpReason, callIds: readonly string[]) => void;
  /** Our create had no response.created within its bound; `dropped` is the request given up on. */
  onCreateTimeout?: (dropped: ResponseRequest | undefined) => void;
  /** A timer's callback threw: reported, never left to end the process. */
  onTimerError?: (what: string, error: unknown) => void;
  /** Create again after the follow-up of a tool turn is due (the seed's auto-respond). */
  autoRespondToTools?: boolean;
  /** Requests waiting beyond this are refused, so a stuck model cannot grow memory. */
  maxQueued?: number;
  /** A refused create is retried at most this many times before it is dropped. */
  maxAttempts?: number;
  /** The clock and timers (default: the monotonic one). */
  timer?: MediaTimer;
  createdTimeoutMs?: number;
  stallTimeoutMs?: number;
  refusedRetryMs?: number;
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

/** Our create on the wire with no response.created of ours yet. */
interface PendingCreate {
  eventId: string;
  createTag: string;
  request: ResponseRequest;
  timeout: MediaTimerHandle;
}

/** A response the server created and has not finished, guarded by its own stall bound. */
interface LiveResponse {
  watchedAt: number;
  stall: MediaTimerHandle;
  /** Function calls it dispatched so far, given on its give-up. */
  callIds: string[];
}

export type EnqueueResult = 'queued' | 'refused_full';

/** How many tool turns are remembered; older ones are forgotten (their follow-up is long due). */
const MAX_TOOL_TURNS = 32;
/**
 * Responses tracked at once, each with its own stall bound. The server runs one at a time; more
 * means a broken peer, and the oldest is given up rather than tracked without a bound.
 */
const TRACKED_LIVE_RESPONSES = 4;
/** Finished response ids remembered to recognise a replayed response.created. */
const TRACKED_FINISHED_RESPONSES = 16;

type Settings = Required<
  Pick<
    ResponseSequencerOptions,
    | 'autoRespondToTools'
    | 'maxQueued'
    | 'maxAttempts'
    | 'createdTimeoutMs'
    | 'stallTimeoutMs'
    | 'refusedRetryMs'
  >
>;

export class ResponseSequencer {
  private readonly options: Settings;
  private readonly timer: MediaTimer;
  private readonly queue: QueuedRequest[] = [];
  /** The response the server is running, or our create that has not been answered yet. */
  private active:
    | { responseId?: string; createEventId?: string; cancelOnCreated?: boolean; foreign?: boolean }
    | undefined;
  private lastCreate: { eventId: string; queued: QueuedRequest } | undefined;
  /**
   * Outlives `active.createEventId` when the server starts a response of its own meanwhile: our
   * create may still be created (its tag then says so) or refused.
   */
  private pending: PendingCreate | undefined;
  private readonly live = new Map<string, LiveResponse>();
  /** Responses recently done or given up, so that a replayed response.created does not revive one. */
  private readonly finished = new Set<string>();
  private lastActivityAt = 0;
  private retryTimer: MediaTimerHandle | undefined;
  private createSeq = 0;
  private callerSpeaking = false;
  private stopped = false;
  private readonly toolTurns = new Map<string, ToolTurn>();
  private readonly callToResponse = new Map<string, string>();
  private readonly outputs = new Set<string>();

  constructor(private readonly io: ResponseSequencerOptions) {
    this.timer = io.timer ?? new MonotonicMediaTimer();
    this.options = {
      autoRespondToTools: io.autoRespondToTools ?? true,
      maxQueued: io.maxQueued ?? 8,
      maxAttempts: io.maxAttempts ?? 3,
      createdTimeoutMs: io.createdTimeoutMs ?? RESPONSE_CREATED_TIMEOUT_MS,
      stallTimeoutMs: io.stallTimeoutMs ?? RESPONSE_STALL_TIMEOUT_MS,
      refusedRetryMs: io.refusedRetryMs ?? REFUSED_CREATE_RETRY_MS,
    };
  }

  /** The response id the server is running, if it told us. The call layer asks here, never keeps its own. */
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

  /** The metadata tag of our create that has no response.created of ours yet. */
  get pendingCreateTag(): string | undefined {
    return this.pending?.createTag;
  }

  get queuedCount(): number {
    return this.queue.length;
  }

  /** Whether a response.created names a response already running or finished (a replay: ignore it). */
  hasSeen(responseId: string): boolean {
    return this.live.has(responseId) || this.finished.has(responseId);
  }

  request(request: ResponseRequest): EnqueueResult {
    if (this.queue.length >= this.options.maxQueued) return 'refused_full';
    this.queue.push({ request, attempts: 0 });
    this.pump();
    return 'queued';
  }

  /** Any server event: every running response shows the server still works on it. */
  onServerActivity(): void {
    if (this.live.size > 0) this.lastActivityAt = this.timer.now();
  }

  /**
   * A response started. `ours` is false when the provider tagged it as not answering our pending
   * create (the server started one on its own at the same moment): that response is now the
   * active one, and our create stays out to be refused and queued again (onCreateRefused); a
   * cancel asked for our create is not applied to the server's response.
   * Returns the tag of the request it answers, when it is ours.
   */
  onResponseCreated(responseId: string, ours = true): { requestTag?: string } {
    const answered = ours ? this.takePending() : undefined;
    if (!ours && this.active?.createEventId !== undefined) {
      this.active = { responseId, foreign: true };
    } else {
      const cancel = this.active?.cancelOnCreated === true;
      this.active = { responseId };
      if (cancel) this.io.sendCancel(responseId);
    }
    // After `active` names it: a response given up to make room must not free the sequencer for
    // a create while this one runs.
    this.watch(responseId);
    return answered?.request.tag !== undefined ? { requestTag: answered.request.tag } : {};
  }

  onFunctionCall(responseId: string, callId: string): void {
    const turn = this.turn(responseId);
    if (!turn.callIds.includes(callId)) turn.callIds.push(callId);
    this.callToResponse.set(callId, responseId);
    const live = this.live.get(responseId);
    if (live !== undefined && !live.callIds.includes(callId)) live.callIds.push(callId);
  }

  /**
   * Whether the response is running: a response.done for one that is not (a duplicate, one given
   * up, one never created) must be ignored, and must not end the bound of the response that runs.
   */
  isRunning(responseId: string): boolean {
    return this.live.has(responseId);
  }

  /** The response is done: its stall bound ends, and the next create may go out. */
  onResponseDone(responseId: string, status: ResponseStatus, callIds: readonly string[]): void {
    const live = this.live.get(responseId);
    if (live !== undefined) this.forgetLive(responseId, live);
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
   * the front of the queue and waits for that response to finish; not a failure. With no response
   * in sight, the queue is tried again after `refusedRetryMs`.
   * Returns the request when it was dropped after too many attempts (it will get no response).
   */
  onCreateRefused(eventId: string): ResponseRequest | undefined {
    if (this.pending?.eventId === eventId) this.takePending();
    const dropped = this.requeueRefused(eventId);
    if (!this.isActive) this.scheduleRetry();
    return dropped;
  }

  /**
   * The create was never answered (bounded by its timeout) or was rejected as invalid: stop
   * waiting for it. Returns the request given up on, which will get no response.
   */
  onCreateFailed(eventId: string): ResponseRequest | undefined {
    if (this.pending?.eventId === eventId) this.takePending();
    if (this.lastCreate?.eventId !== eventId) return undefined;
    const dropped = this.lastCreate.queued.request;
    this.lastCreate = undefined;
    if (this.active?.createEventId === eventId) this.active = undefined;
    this.pump();
    return dropped;
  }

  /** The active response went silent (no done within its bound): stop waiting for it. */
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

  /** Disconnected: nothing more goes out, nothing is waiting, no timer is left. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.active = undefined;
    this.lastCreate = undefined;
    this.takePending();
    if (this.retryTimer !== undefined) this.timer.cancel(this.retryTimer);
    this.retryTimer = undefined;
    for (const live of this.live.values()) this.timer.cancel(live.stall);
    this.live.clear();
    this.toolTurns.clear();
    this.callToResponse.clear();
    this.outputs.clear();
  }

  private requeueRefused(eventId: string): ResponseRequest | undefined {
    if (this.lastCreate?.eventId !== eventId) return undefined;
    const { queued } = this.lastCreate;
    this.lastCreate = undefined;
    if (this.active?.createEventId === eventId) {
      // No response.created reached us for it: the server's active response predates what we saw.
      // Waiting for a done we may never see would stall; the retry comes after a short delay.
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

  private scheduleRetry(): void {
    if (this.retryTimer !== undefined) this.timer.cancel(this.retryTimer);
    this.retryTimer = this.timer.schedule(
      this.guarded('create retry', () => {
        this.retryTimer = undefined;
        this.pump();
      }),
      this.options.refusedRetryMs,
    );
  }

  /** Ends the wait for our create's response.created (answered, refused, failed or stopped). */
  private takePending(): PendingCreate | undefined {
    const pending = this.pending;
    if (pending !== undefined) this.timer.cancel(pending.timeout);
    this.pending = undefined;
    return pending;
  }

  private watch(responseId: string): void {
    if (this.live.size >= TRACKED_LIVE_RESPONSES) {
      const oldest = this.live.keys().next().value;
      if (oldest !== undefined) this.giveUp(oldest, 'superseded');
    }
    const watchedAt = this.timer.now();
    const stall = this.scheduleStallCheck(responseId, this.options.stallTimeoutMs);
    this.live.set(responseId, { watchedAt, stall, callIds: [] });
  }

  private scheduleStallCheck(responseId: string, delayMs: number): MediaTimerHandle {
    return this.timer.schedule(
      this.guarded('response stall bound', () => this.checkStall(responseId)),
      delayMs,
    );
  }

  /** Server activity since the check was scheduled moves the bound on rather than resetting a timer per event. */
  private checkStall(responseId: string): void {
    const live = this.live.get(responseId);
    if (live === undefined) return;
    const silentMs = this.timer.now() - Math.max(live.watchedAt, this.lastActivityAt);
    if (silentMs < this.options.stallTimeoutMs) {
      live.stall = this.scheduleStallCheck(responseId, this.options.stallTimeoutMs - silentMs);
      return;
    }
    this.giveUp(responseId, 'stalled');
  }

  /**
   * Stops waiting for a response's done. If the server is still running it (its events were lost,
   * not its work), the cancel ends it before our next create arrives; if it is long gone, the
   * answer is a benign response_cancel_not_active and a late done is ignored.
   */
  private giveUp(responseId: string, reason: GiveUpReason): void {
    const live = this.live.get(responseId);
    if (live === undefined) return;
    this.forgetLive(responseId, live);
    this.io.sendCancel(responseId);
    try {
      this.io.onGiveUp?.(responseId, reason, live.callIds);
    } finally {
      // Freed whatever the port did: a throwing listener must not stall every later response.
      this.onResponseStalled(responseId);
    }
  }

  private forgetLive(responseId: string, live: LiveResponse): void {
    this.timer.cancel(live.stall);
    this.live.delete(responseId);
    this.finished.add(responseId);
    if (this.finished.size > TRACKED_FINISHED_RESPONSES) {
      const oldest = this.finished.values().next().value;
      if (oldest !== undefined) this.finished.delete(oldest);
    }
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
    const createTag = `c${(++this.createSeq).toString(36)}`;
    const eventId = this.io.sendCreate(next.request, createTag);
    this.active = { createEventId: eventId };
    this.lastCreate = { eventId, queued: next };
    this.takePending();
    const timeout = this.timer.schedule(
      this.guarded('response.created timeout', () => {
        const dropped = this.onCreateFailed(eventId);
        this.io.onCreateTimeout?.(dropped);
      }),
      this.options.createdTimeoutMs,
    );
    this.pending = { eventId, createTag, request: next.request, timeout };
  }

  /** A timer's callback that cannot throw: an exception there would end the whole gateway. */
  private guarded(what: string, callback: () => void): () => void {
    return () => {
      try {
        callback();
      } catch (error) {
        this.io.onTimerError?.(what, error);
      }
    };
  }
}
