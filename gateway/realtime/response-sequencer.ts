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
 *
 * Each request gets a ResponseHandle, settled here exactly once: created, its items, done, or
 * refused (test/unit/realtime/response-handle.test.ts). The create's metadata tag stays between
 * the sequencer and the wire: it tells our response.created from the server's own.
 */
import {
  MonotonicMediaTimer,
  type MediaTimer,
  type MediaTimerHandle,
} from '../media/media-timer.ts';
import type { RefusalReason, ResponseRequest, ResponseStatus } from './realtime-session.ts';
import { RequestedResponse } from './response-handle.ts';

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
  /** Our create had no response.created within its bound; `dropped` is the handle given up on. */
  onCreateTimeout?: (dropped: RequestedResponse | undefined) => void;
  /** A timer's callback threw: reported, never left to end the process. */
  onTimerError?: (what: string, error: unknown) => void;
  /** A listener of a response handle threw: reported, never left to break the sequencer. */
  onHandleListenerError?: (error: unknown) => void;
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
  handle: RequestedResponse;
  attempts: number;
}

interface ToolTurn {
  callIds: string[];
  done: boolean;
  status?: ResponseStatus;
  /** The handle of the response that speaks its outputs, given out with the first output. */
  followUp?: RequestedResponse;
}

/** Our create on the wire with no response.created of ours yet. */
interface PendingCreate {
  eventId: string;
  createTag: string;
  handle: RequestedResponse;
  timeout: MediaTimerHandle;
}

/** A response the server created and has not finished, guarded by its own stall bound. */
interface LiveResponse {
  watchedAt: number;
  stall: MediaTimerHandle;
  /** Function calls it dispatched so far, given on its give-up. */
  callIds: string[];
  /** The handles it answers (a request of ours, or tool outputs waiting for a response). */
  handles: RequestedResponse[];
}

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
  /**
   * Handles of tool outputs whose turn gets no follow-up (it was cut, or follow-ups are off):
   * the next response the server starts by itself speaks them.
   */
  private unclaimed: RequestedResponse[] = [];

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

  /** Queues a request; its handle is refused at once when the queue is full (`busy`) or stopped. */
  request(request: ResponseRequest): RequestedResponse {
    const handle = this.newHandle();
    if (this.stopped) handle.markRefused('closed');
    else if (this.queue.length >= this.options.maxQueued) handle.markRefused('busy');
    else {
      this.queue.push({ request, handle, attempts: 0 });
      this.pump();
    }
    return handle;
  }

  /** Any server event: every running response shows the server still works on it. */
  onServerActivity(): void {
    if (this.live.size > 0) this.lastActivityAt = this.timer.now();
  }

  /**
   * A response started. `ours` is false when the provider tagged it as not answering our pending
   * create (the server started one on its own at the same moment): that response is now the
   * active one, and our create stays out to be refused and queued again (onCreateRefused); a
   * cancel asked for our create is not applied to the server's response. Its handle is created:
   * our create's, or, for a response the server started itself, those of unclaimed tool outputs.
   */
  onResponseCreated(responseId: string, ours = true): void {
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
    const live = this.watch(responseId);
    const handles = answered !== undefined ? [answered.handle] : this.takeUnclaimed();
    live.handles.push(...handles);
    for (const handle of handles) handle.markCreated(responseId);
  }

  /** An output item of a response appeared (its first audio, or a function call). */
  onOutputItem(responseId: string, itemId: string): void {
    const handles = this.live.get(responseId)?.handles;
    if (handles === undefined) return;
    for (const handle of handles) handle.markItem(itemId);
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

  /** The response is done: its stall bound ends, its handles are done, and the next create may go out. */
  onResponseDone(
    responseId: string,
    status: ResponseStatus,
    callIds: readonly string[],
    reason?: string,
  ): void {
    const live = this.live.get(responseId);
    if (live !== undefined) {
      this.forgetLive(responseId, live);
      for (const handle of live.handles) handle.markDone(status, reason);
    }
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

  /**
   * An output went out. Returns the handle of the response that speaks it: its turn's follow-up
   * (one for every output of the turn), or the next response the server starts itself.
   */
  onToolOutput(callId: string): RequestedResponse {
    const responseId = this.callToResponse.get(callId);
    const turn = responseId === undefined ? undefined : this.toolTurns.get(responseId);
    // An output for a call no tool turn knows (forgotten, or never announced) settles nothing.
    if (responseId === undefined || turn === undefined) return this.unclaimedHandle();
    this.outputs.add(callId);
    const handle = (turn.followUp ??= this.newHandle());
    this.settleTurn(responseId, turn);
    this.pump();
    return handle;
  }

  /**
   * The server refused one of our creates because a response is active. The request goes back to
   * the front of the queue and waits for that response to finish; not a failure. With no response
   * in sight, the queue is tried again after `refusedRetryMs`.
   * Returns the handle (refused) when it was dropped after too many attempts.
   */
  onCreateRefused(eventId: string): RequestedResponse | undefined {
    if (this.pending?.eventId === eventId) this.takePending();
    const dropped = this.requeueRefused(eventId);
    if (!this.isActive) this.scheduleRetry();
    return dropped;
  }

  /**
   * The create was never answered (bounded by its timeout) or was rejected as invalid: stop
   * waiting for it. Returns the handle given up on (refused, unless it was created meanwhile).
   */
  onCreateFailed(
    eventId: string,
    reason: RefusalReason = 'refused',
  ): RequestedResponse | undefined {
    if (this.pending?.eventId === eventId) this.takePending();
    if (this.lastCreate?.eventId !== eventId) return undefined;
    const dropped = this.lastCreate.queued.handle;
    dropped.markRefused(reason);
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

  /**
   * Disconnected: nothing more goes out, nothing is waiting, no timer is left. Every handle still
   * open settles: refused when it was not created, done as failed when it ran.
   */
  stop(): void {
    this.stopped = true;
    const open = new Set<RequestedResponse>([
      ...this.queue.map((queued) => queued.handle),
      ...(this.lastCreate !== undefined ? [this.lastCreate.queued.handle] : []),
      ...(this.pending !== undefined ? [this.pending.handle] : []),
      ...[...this.live.values()].flatMap((live) => live.handles),
      ...[...this.toolTurns.values()].flatMap((turn) => turn.followUp ?? []),
      ...this.unclaimed,
    ]);
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
    this.unclaimed = [];
    for (const handle of open) handle.markClosed();
  }

  private newHandle(): RequestedResponse {
    const report = this.io.onHandleListenerError;
    return new RequestedResponse(report === undefined ? {} : { onListenerError: report });
  }

  /** The handle the next response the server starts itself answers, shared while it waits. */
  private unclaimedHandle(): RequestedResponse {
    const waiting = this.unclaimed.at(-1);
    if (waiting !== undefined) return waiting;
    const handle = this.newHandle();
    this.claimLater(handle);
    return handle;
  }

  private claimLater(handle: RequestedResponse): void {
    if (this.unclaimed.includes(handle)) return;
    this.unclaimed.push(handle);
    // Bounded like tool turns: one waiting this long for a response is not going to get one.
    if (this.unclaimed.length > MAX_TOOL_TURNS) this.unclaimed.shift()?.markRefused('timeout');
  }

  private takeUnclaimed(): RequestedResponse[] {
    const handles = this.unclaimed;
    this.unclaimed = [];
    return handles;
  }

  private requeueRefused(eventId: string): RequestedResponse | undefined {
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
      if (queued.attempts >= this.options.maxAttempts) {
        queued.handle.markRefused('refused');
        return queued.handle;
      }
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

  private watch(responseId: string): LiveResponse {
    if (this.live.size >= TRACKED_LIVE_RESPONSES) {
      const oldest = this.live.keys().next().value;
      if (oldest !== undefined) this.giveUp(oldest, 'superseded');
    }
    const watchedAt = this.timer.now();
    const stall = this.scheduleStallCheck(responseId, this.options.stallTimeoutMs);
    const live: LiveResponse = { watchedAt, stall, callIds: [], handles: [] };
    this.live.set(responseId, live);
    return live;
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
      for (const handle of live.handles) handle.markDone('failed', reason);
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
        const forgotten = oldest === undefined ? undefined : this.toolTurns.get(oldest);
        if (oldest !== undefined) this.forgetTurn(oldest);
        if (forgotten?.followUp !== undefined) this.claimLater(forgotten.followUp);
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
      this.queue.unshift({ request: {}, handle: turn.followUp ?? this.newHandle(), attempts: 0 });
    } else if (turn.followUp !== undefined) {
      this.claimLater(turn.followUp);
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
        const dropped = this.onCreateFailed(eventId, 'timeout');
        this.io.onCreateTimeout?.(dropped);
      }),
      this.options.createdTimeoutMs,
    );
    this.pending = { eventId, createTag, handle: next.handle, timeout };
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
