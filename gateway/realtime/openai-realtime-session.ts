/**
 * OpenAI Realtime (GA) over WebSocket, behind the provider-neutral RealtimeSession. The same
 * class talks to api.openai.com and to the local simulator (gateway/realtime/simulator/).
 *
 * What it guarantees (see README.md for the sequence diagram):
 * - at most one active response; creates wait for the previous response.done, and a refused
 *   create (conversation_already_has_active_response) is queued again, not reported;
 * - a response that dispatched function calls gets exactly one follow-up create, after it is done
 *   and every call has an output, in either order;
 * - barge-in: on speech started, the active response is cancelled (unless the server does it,
 *   interrupt_response) and the assistant item is truncated at what the caller heard;
 * - every response_created is followed by one response_done (or disconnected): the server's,
 *   or a failed one when the response goes silent past its stall bound (and is cancelled);
 * - a server event is checked before it is used: one missing an id or a field the client reads
 *   is a protocol error, reported (bounded per session) and counted, never acted on;
 * - no silent reconnect: any close is one `disconnected` event with a reason; audio sent while
 *   disconnected is dropped and counted, never buffered.
 *
 * The pieces: the socket and its one close cause (OpenAIRealtimeTransport), which response is
 * active, every running one's bounds and the handle of each response asked for
 * (ResponseSequencer, the only place that knows), the
 * session configuration (SessionUpdates), and `dispatchServerEvent`, which routes each server
 * event to one `handleX` below.
 */
import type { RawData } from 'ws';
import { CallgateError } from '../../config/errors.ts';
import { rootLogger, type Logger } from '../../config/log.ts';
import { counter } from '../../config/metrics.ts';
import type { MediaTimer } from '../media/media-timer.ts';
import { AssistantAudioLengths } from './assistant-audio-lengths.ts';
import { AudioAppendWriter } from './openai-audio-append-writer.ts';
import { AudioDeltaReader } from './openai-audio-delta-reader.ts';
import {
  dispatchServerEvent,
  type ServerEventHandlers,
  type ServerEventOf,
} from './openai-event-dispatch.ts';
import {
  SERVER_EVENT_TYPES,
  WIRE_ERROR,
  type ClientEvent,
  type ServerEvent,
} from './openai-protocol.ts';
import {
  OpenAIRealtimeTransport,
  SESSION_LIMIT_TEXT,
  type TransportClosed,
} from './openai-realtime-transport.ts';
import { serverEventProblem } from './openai-server-event-check.ts';
import { SessionUpdates } from './openai-session-updates.ts';
import {
  dtmfMessage,
  type DisconnectReason,
  type Interruption,
  type PlaybackPosition,
  type RealtimeEvent,
  type RealtimeEventOf,
  type RealtimeEventType,
  type RealtimeSession,
  type ResponseHandle,
  type ResponseRequest,
  type ResponseStatus,
  type SessionConfig,
} from './realtime-session.ts';
import { RequestedResponse } from './response-handle.ts';
import {
  ResponseSequencer,
  type GiveUpReason,
  RESPONSE_STALL_TIMEOUT_MS,
  RESPONSE_CREATED_TIMEOUT_MS,
} from './response-sequencer.ts';
import { sessionConfigToWire } from './session-config-wire.ts';
import { TypedEventEmitter } from './typed-event-emitter.ts';

/** The provider answers the WebSocket upgrade and sends session.created well within this. */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Largest server frame read. Audio deltas are a few KB; a session.updated with many tools a few
 * tens of KB. Anything larger is a broken or hostile peer, and ws closes with 1009.
 */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;
/**
 * Caller audio queued in the socket beyond this (about 60 s of base64 G.711) is dropped instead:
 * a stalled link must not grow memory, and minute-old audio is useless to the model anyway.
 */
export const MAX_SEND_BUFFER_BYTES = 640 * 1024;
/** The provider ends a session after 60 minutes (error session_expired, close 1001). */
export const SESSION_LIMIT_MS = 60 * 60 * 1000;
/**
 * `session_expiring` fires this long before the limit: enough for the call layer to wait for a
 * pause in the conversation (a turn is rarely longer than a minute) and re-open with context.
 */
export const SESSION_EXPIRY_WARNING_MS = 5 * 60 * 1000;
/**
 * Protocol errors (unreadable frames, broken events, unknown types) reported as `error` events per
 * session; beyond this they are only counted and logged at debug, so a peer sending garbage in a
 * loop cannot flood the call layer.
 */
export const REPORTED_PROTOCOL_ERRORS = 32;
/** The response.create metadata key that tags our creates. */
const CREATE_TAG_KEY = 'callgate_create';
/** ws send options for the append event (sent as text), made once rather than per frame. */
const TEXT_FRAME = { binary: false } as const;
/** How many client event ids are remembered to attribute server errors to what caused them. */
const TRACKED_CLIENT_EVENTS = 256;

const KNOWN_WIRE_ERRORS: ReadonlySet<string> = new Set(Object.values(WIRE_ERROR));

const droppedAudio = counter({
  name: 'callgate_realtime_audio_dropped_frames_total',
  help: 'Caller audio frames dropped by the realtime client (disconnected or send buffer full)',
});
const protocolErrors = counter<'kind'>({
  name: 'callgate_realtime_protocol_errors_total',
  help: 'Unreadable or unexpected frames from the realtime model',
  labelNames: ['kind'],
});
const disconnects = counter<'reason'>({
  name: 'callgate_realtime_disconnects_total',
  help: 'Realtime model sessions that ended, by reason',
  labelNames: ['reason'],
});
const responses = counter<'status'>({
  name: 'callgate_realtime_responses_total',
  help: 'Realtime model responses by final status',
  labelNames: ['status'],
});
const serverErrors = counter<'code'>({
  name: 'callgate_realtime_server_errors_total',
  help: 'Error events sent by the realtime model, by code',
  labelNames: ['code'],
});

export interface OpenAIRealtimeSessionOptions {
  /** wss://api.openai.com/v1/realtime, or the simulator's ws://127.0.0.1:port URL. */
  url: string;
  model: string;
  /** Bearer token; unset for the local simulator. */
  apiKey?: string;
  voice?: string;
  /** Reports what the caller heard of an assistant item; enables truncation on barge-in. */
  playback?: PlaybackPosition;
  /** One follow-up response after a tool turn (default true). */
  autoRespondToTools?: boolean;
  /** The call's signal: aborting it closes the session. */
  signal?: AbortSignal;
  logger?: Logger;
  /** Clock and timers of the response bounds (default: the monotonic one). */
  timer?: MediaTimer;
  connectTimeoutMs?: number;
  sessionUpdateTimeoutMs?: number;
  responseCreatedTimeoutMs?: number;
  responseStallTimeoutMs?: number;
  pingIntervalMs?: number;
  pongTimeoutMs?: number;
  maxFrameBytes?: number;
  maxSendBufferBytes?: number;
  maxQueuedResponses?: number;
  sessionLimitMs?: number;
  expiryWarningMs?: number;
}

type State = 'idle' | 'connecting' | 'open' | 'closed';

export class OpenAIRealtimeSession implements RealtimeSession {
  private readonly emitter: TypedEventEmitter<RealtimeEvent>;
  private readonly logger: Logger;
  private readonly sequencer: ResponseSequencer;
  private readonly updates: SessionUpdates;
  private readonly audioDeltas = new AudioDeltaReader();
  private readonly audioAppends = new AudioAppendWriter();
  private readonly assistantAudio = new AssistantAudioLengths();
  private readonly handlers: ServerEventHandlers;
  private transport: OpenAIRealtimeTransport | undefined;
  private state: State = 'idle';
  private eventSeq = 0;
  private sessionId: string | undefined;
  private connectWaiter: { resolve: () => void; reject: (error: Error) => void } | undefined;
  private readonly clientEvents = new Map<string, ClientEvent['type']>();
  private readonly unknownTypes = new Set<string>();
  private reportedProtocolErrors = 0;
  /** Set once a response.created carried our tag back: from then on an untagged one is the server's. */
  private providerEchoesMetadata = false;
  private expiryTimer: NodeJS.Timeout | undefined;
  private dropped = 0;
  private reportedDrop = false;
  private readonly onAbort = (): void => {
    this.transport?.setCloseCause({ reason: 'aborted' });
    void this.closeFor('aborted');
  };

  constructor(private readonly options: OpenAIRealtimeSessionOptions) {
    this.logger = (options.logger ?? rootLogger()).child({
      component: 'realtime',
      provider: 'openai',
    });
    this.emitter = new TypedEventEmitter<RealtimeEvent>({
      onListenerError: (error, eventType) =>
        this.logger.error('realtime event listener threw', { eventType, error }),
    });
    this.sequencer = new ResponseSequencer({
      sendCreate: (request, createTag) => this.sendCreate(request, createTag),
      sendCancel: (responseId) => this.send({ type: 'response.cancel', response_id: responseId }),
      onGiveUp: (responseId, reason, callIds) =>
        this.onResponseGivenUp(responseId, reason, callIds),
      onCreateTimeout: () => {
        const timeoutMs = options.responseCreatedTimeoutMs ?? RESPONSE_CREATED_TIMEOUT_MS;
        this.emitError(
          new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: 'response.create', timeoutMs }),
        );
      },
      onTimerError: (timer, error) =>
        this.logger.error('realtime timer callback threw', { timer, error }),
      onHandleListenerError: (error) =>
        this.logger.error('realtime response handle listener threw', { error }),
      ...(options.timer !== undefined && { timer: options.timer }),
      ...(options.responseCreatedTimeoutMs !== undefined && {
        createdTimeoutMs: options.responseCreatedTimeoutMs,
      }),
      ...(options.responseStallTimeoutMs !== undefined && {
        stallTimeoutMs: options.responseStallTimeoutMs,
      }),
      ...(options.autoRespondToTools !== undefined && {
        autoRespondToTools: options.autoRespondToTools,
      }),
      ...(options.maxQueuedResponses !== undefined && { maxQueued: options.maxQueuedResponses }),
    });
    this.updates = new SessionUpdates({
      ...(options.sessionUpdateTimeoutMs !== undefined && {
        timeoutMs: options.sessionUpdateTimeoutMs,
      }),
      onNoTurnDetection: () => this.sequencer.onSpeechStopped(),
      onTimeout: (error) => this.emitError(error),
    });
    this.handlers = {
      'session.created': (event) => this.handleSessionCreated(event),
      'session.updated': (event) => this.handleSessionUpdated(event),
      error: (event) => this.handleServerError(event),
      'input_audio_buffer.speech_started': (event) => this.handleSpeechStarted(event),
      'input_audio_buffer.speech_stopped': (event) => this.handleSpeechStopped(event),
      'input_audio_buffer.cleared': () => this.handleInputCleared(),
      'response.created': (event) => this.handleResponseCreated(event),
      'response.output_audio.delta': (event) =>
        this.handleAudioDelta(event.response_id, event.item_id, Buffer.from(event.delta, 'base64')),
      'response.output_audio_transcript.delta': (event) =>
        this.handleAssistantTranscriptDelta(event),
      'response.output_audio_transcript.done': (event) => this.handleAssistantTranscriptDone(event),
      'conversation.item.input_audio_transcription.delta': (event) =>
        this.handleUserTranscriptDelta(event),
      'conversation.item.input_audio_transcription.completed': (event) =>
        this.handleUserTranscriptDone(event),
      'response.function_call_arguments.done': (event) => this.handleFunctionCall(event),
      'response.done': (event) => this.handleResponseDone(event),
      'conversation.item.truncated': (event) => this.handleItemTruncated(event),
    };
  }

  /** Caller audio frames dropped because the session was not connected or the link was stalled. */
  get droppedAudioFrames(): number {
    return this.dropped;
  }

  get connected(): boolean {
    return this.state === 'open';
  }

  /** The provider's session id (sess_...), once connected. */
  get providerSessionId(): string | undefined {
    return this.sessionId;
  }

  /** The response the server is running, as the sequencer knows it (the only place that does). */
  get activeResponseId(): string | undefined {
    return this.sequencer.activeResponseId;
  }

  on<T extends RealtimeEventType>(
    type: T,
    listener: (event: RealtimeEventOf<T>) => void,
  ): () => void {
    return this.emitter.on(type, listener);
  }

  onAny(listener: (event: RealtimeEvent) => void): () => void {
    return this.emitter.onAny(listener);
  }

  async connect(): Promise<void> {
    if (this.state !== 'idle')
      throw new CallgateError('CALLGATE_ERR_MODEL_CONNECT', {
        url: this.options.url,
        reason: `session is ${this.state}`,
      });
    this.state = 'connecting';
    const url = new URL(this.options.url);
    url.searchParams.set('model', this.options.model);
    const timeoutMs = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    const maxFrameBytes = this.options.maxFrameBytes ?? MAX_FRAME_BYTES;
    const transport = new OpenAIRealtimeTransport({
      url,
      ...(this.options.apiKey !== undefined && { apiKey: this.options.apiKey }),
      maxFrameBytes,
      handshakeTimeoutMs: timeoutMs,
      ...(this.options.pingIntervalMs !== undefined && {
        pingIntervalMs: this.options.pingIntervalMs,
      }),
      ...(this.options.pongTimeoutMs !== undefined && {
        pongTimeoutMs: this.options.pongTimeoutMs,
      }),
      onFrame: (data, isBinary) => this.onFrame(data, isBinary),
      onFrameTooLarge: () => {
        protocolErrors.inc({ kind: 'frame_too_large' });
        this.emitError(
          new CallgateError('CALLGATE_ERR_MODEL_FRAME_TOO_LARGE', {
            size: `more than ${maxFrameBytes}`,
            limit: maxFrameBytes,
          }),
        );
      },
      onSocketError: (error) => this.logger.warn('realtime socket error', { error: error.message }),
      onClose: (closed) => this.onClose(closed),
      guarded: (what, callback) => this.guarded(what, callback),
    });
    this.transport = transport;
    if (this.options.signal !== undefined) {
      if (this.options.signal.aborted) this.onAbort();
      else this.options.signal.addEventListener('abort', this.onAbort, { once: true });
    }
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.connectWaiter = undefined;
        reject(
          new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: 'session.created', timeoutMs }),
        );
        transport.terminate({ reason: 'network', detail: 'no session.created' });
      }, timeoutMs);
      this.connectWaiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
    });
  }

  async configure(config: SessionConfig): Promise<void> {
    const session = sessionConfigToWire(config, {
      voice: this.options.voice ?? 'marin',
      inputFormat: this.updates.inputFormat,
      outputFormat: this.updates.outputFormat,
    });
    if (this.state !== 'open')
      throw new CallgateError('CALLGATE_ERR_MODEL_NOT_CONNECTED', { what: 'session.update' });
    const eventId = this.send({ type: 'session.update', session });
    await this.updates.awaitUpdated(eventId, session.instructions);
  }

  sendAudio(audio: Buffer): void {
    const transport = this.transport;
    if (this.state !== 'open' || transport === undefined) {
      this.dropAudio('audio (not connected)');
      return;
    }
    if (transport.bufferedAmount > (this.options.maxSendBufferBytes ?? MAX_SEND_BUFFER_BYTES)) {
      this.dropAudio('audio (send buffer full)');
      return;
    }
    // The hot path (50 frames a second per call): the event is written straight into bytes, in
    // the buffer of the previous frame. Handing ws a Buffer (sent as text) lets it mask into a
    // single frame buffer of its own: one plain socket write per frame rather than a corked
    // header-and-payload pair, and our buffer is free again once send returns. Unless ws or the
    // socket still holds bytes (ws queues a send, or sends a frame whose mask is all zeros
    // unmasked, and the kernel did not take it): those may be ours, so the next frame gets a new one.
    transport.sendFrame(this.audioAppends.write(audio), TEXT_FRAME);
    if (transport.bufferedAmount > 0) this.audioAppends.release();
  }

  commitAudio(): void {
    this.send({ type: 'input_audio_buffer.commit' });
  }

  clearAudio(): void {
    this.send({ type: 'input_audio_buffer.clear' });
  }

  cancelResponse(): void {
    this.sequencer.cancelActive();
  }

  async cancelAndWait(timeoutMs: number): Promise<void> {
    if (!this.sequencer.isActive || this.state !== 'open') return;
    const done = this.nextEvent(['response_done', 'disconnected'], timeoutMs);
    this.sequencer.cancelActive();
    await done;
  }

  truncate(itemId: string, playedMs: number): void {
    const receivedMs = this.assistantAudio.receivedMs(itemId, this.updates.outputFormat);
    let audioEndMs = Math.max(0, Math.floor(playedMs));
    if (receivedMs !== undefined) {
      // The provider refuses an offset beyond the audio it produced; nothing produced, nothing to cut.
      if (receivedMs === 0) return;
      audioEndMs = Math.min(audioEndMs, receivedMs);
    }
    this.send({
      type: 'conversation.item.truncate',
      item_id: itemId,
      content_index: 0,
      audio_end_ms: audioEndMs,
    });
    this.assistantAudio.truncated(itemId);
  }

  sendToolOutput(callId: string, output: unknown): ResponseHandle {
    const text = typeof output === 'string' ? output : JSON.stringify(output ?? null);
    if (
      this.send({
        type: 'conversation.item.create',
        item: { type: 'function_call_output', call_id: callId, output: text },
      }) === undefined
    )
      return refusedHandle('not_connected');
    return this.sequencer.onToolOutput(callId);
  }

  createResponse(request: ResponseRequest = {}): ResponseHandle {
    if (this.state !== 'open') {
      this.emitError(
        new CallgateError('CALLGATE_ERR_MODEL_NOT_CONNECTED', { what: 'response.create' }),
      );
      return refusedHandle('not_connected');
    }
    const handle = this.sequencer.request(request);
    if (handle.end?.type === 'refused') {
      this.emitError(
        new CallgateError('CALLGATE_ERR_MODEL_BUSY', {
          limit: this.sequencer.queuedCount,
          what: 'response.create',
        }),
      );
    }
    return handle;
  }

  addSystemMessage(text: string): void {
    this.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'system', content: [{ type: 'input_text', text }] },
    });
  }

  sendDtmf(digit: string): void {
    if (!/^[0-9A-D*#]$/.test(digit)) return;
    this.addSystemMessage(dtmfMessage(digit));
    this.createResponse();
  }

  async close(): Promise<void> {
    await this.closeFor('closed');
  }

  private async closeFor(reason: 'closed' | 'aborted'): Promise<void> {
    const transport = this.transport;
    if (transport === undefined || this.state === 'closed') {
      this.state = 'closed';
      return;
    }
    transport.setCloseCause({ reason });
    await transport.closeAndWait(1000, 'closed by callgate');
  }

  // ---- outgoing ----------------------------------------------------------------------------

  /** Sends a client event; returns its event id, or undefined when nothing went out. */
  private send(event: ClientEvent): string | undefined {
    const transport = this.transport;
    if (this.state !== 'open' || transport === undefined) return undefined;
    const eventId = `evt_cg_${(++this.eventSeq).toString(36)}`;
    event.event_id = eventId;
    this.clientEvents.set(eventId, event.type);
    if (this.clientEvents.size > TRACKED_CLIENT_EVENTS) {
      const oldest = this.clientEvents.keys().next().value;
      if (oldest !== undefined) this.clientEvents.delete(oldest);
    }
    transport.sendText(JSON.stringify(event));
    return eventId;
  }

  /**
   * Tagged so that response.created tells our response from one the server started on its own at
   * the same moment (server VAD); the provider echoes a response's metadata.
   */
  private sendCreate(request: ResponseRequest, createTag: string): string {
    const response = {
      ...(request.instructions !== undefined && { instructions: request.instructions }),
      metadata: { [CREATE_TAG_KEY]: createTag },
    };
    return this.send({ type: 'response.create', response }) ?? '';
  }

  private dropAudio(what: string): void {
    this.dropped += 1;
    droppedAudio.inc();
    if (!this.reportedDrop) {
      // One event per session, not one per 20 ms frame; the count keeps growing.
      this.reportedDrop = true;
      this.emitError(new CallgateError('CALLGATE_ERR_MODEL_NOT_CONNECTED', { what }));
    }
  }

  // ---- incoming ----------------------------------------------------------------------------

  private onFrame(data: RawData, isBinary: boolean): void {
    if (isBinary) {
      this.protocolError('binary', 'a binary frame');
      return;
    }
    // Audio deltas (most frames) are read from their bytes; anything else is parsed in full.
    const delta = Buffer.isBuffer(data) ? this.audioDeltas.read(data) : undefined;
    if (delta !== undefined) {
      this.sequencer.onServerActivity();
      this.handleAudioDelta(delta.responseId, delta.itemId, delta.audio);
      return;
    }
    let event: unknown;
    try {
      event = JSON.parse(rawText(data));
    } catch (error) {
      this.protocolError(
        'malformed_json',
        `a frame that is not JSON (${(error as Error).message})`,
      );
      return;
    }
    if (
      typeof event !== 'object' ||
      event === null ||
      typeof (event as { type?: unknown }).type !== 'string'
    ) {
      this.protocolError('no_type', 'an event without a type');
      return;
    }
    const fields = event as Record<string, unknown> & { type: string };
    const type = fields.type;
    if (!SERVER_EVENT_TYPES.has(type)) {
      // Each unknown type is reported once (a newer API adds events); repeats are only counted.
      if (this.unknownTypes.has(type) || this.unknownTypes.size >= REPORTED_PROTOCOL_ERRORS) {
        protocolErrors.inc({ kind: 'unknown_type' });
        return;
      }
      this.unknownTypes.add(type);
      this.protocolError('unknown_type', `unknown event type ${type.slice(0, 64)}`);
      return;
    }
    const problem = serverEventProblem(fields);
    if (problem !== undefined) {
      this.protocolError('bad_field', `a ${type} event whose ${problem}`);
      return;
    }
    // Any server event while a response runs shows the server is still working on it.
    this.sequencer.onServerActivity();
    try {
      dispatchServerEvent(event as ServerEvent, this.handlers);
    } catch (error) {
      // A known type with a shape we did not expect (missing fields): reported, never fatal.
      this.protocolError(
        'bad_shape',
        `a ${type} event that could not be read (${(error as Error).message})`,
      );
    }
  }

  // ---- handlers: one per server event --------------------------------------------------------

  private handleSessionCreated(event: ServerEventOf<'session.created'>): void {
    if (this.state !== 'connecting') {
      // One session per socket: a second one would restart the expiry warning, not a session.
      this.protocolError('repeated_session_created', 'a second session.created');
      return;
    }
    this.sessionId = event.session.id;
    this.updates.apply(event.session);
    this.state = 'open';
    this.startExpiryWarning();
    this.connectWaiter?.resolve();
    this.connectWaiter = undefined;
  }

  private handleSessionUpdated(event: ServerEventOf<'session.updated'>): void {
    if (this.updates.onUpdated(event.session)) return;
    protocolErrors.inc({ kind: 'unsolicited_session_updated' });
    this.logger.debug(
      'session.updated that answers no waiting session.update; not taken as an answer',
      { waiting: this.updates.waiting },
    );
  }

  private handleServerError({ error }: ServerEventOf<'error'>): void {
    const code = error.code ?? error.type;
    // Only codes callgate knows become label values: a peer cannot grow the metric's cardinality.
    serverErrors.inc({ code: KNOWN_WIRE_ERRORS.has(code) ? code : 'other' });
    // The event it answers; a server may also leave event_id out.
    const eventId = error.event_id ?? null;
    const causeType = eventId === null ? undefined : this.clientEvents.get(eventId);
    if (code === WIRE_ERROR.activeResponse) {
      if (eventId !== null) {
        if (this.sequencer.onCreateRefused(eventId) !== undefined) {
          this.emitError(
            new CallgateError('CALLGATE_ERR_MODEL_BUSY', {
              limit: 0,
              what: 'a response that was refused repeatedly',
            }),
          );
        }
      }
      this.logger.debug('response.create refused while a response is active; queued again', {
        eventId,
      });
      return;
    }
    if (code === WIRE_ERROR.cancelNotActive) {
      // The response finished on its own while our cancel was in flight: nothing to do.
      this.logger.debug('response.cancel arrived after the response finished');
      return;
    }
    if (code === WIRE_ERROR.sessionExpired || SESSION_LIMIT_TEXT.test(error.message)) {
      // Expected at 60 minutes; the provider closes next. Close ourselves in case it does not.
      this.transport?.setCloseCause({ reason: 'session_limit' });
      this.transport?.close(1000, 'session limit reached');
      return;
    }
    const rejected = new CallgateError('CALLGATE_ERR_MODEL_REJECTED', {
      what: causeType ?? 'an event',
      providerCode: code,
      reason: error.message,
    });
    this.logger.warn('realtime model refused an event', {
      code: rejected.code,
      providerCode: code,
      what: causeType,
      providerSessionId: this.sessionId,
    });
    this.updates.refused(eventId, rejected);
    // A create refused for anything but an active response gets no response: its handle is refused.
    if (causeType === 'response.create' && eventId !== null) this.sequencer.onCreateFailed(eventId);
    this.emitError(rejected, { providerCode: code });
  }

  private handleSpeechStarted(event: ServerEventOf<'input_audio_buffer.speech_started'>): void {
    const wasActive = this.sequencer.isActive;
    // A create still in flight becomes a response after the caller started speaking, which the
    // server's interrupt_response does not cover: it is cancelled as soon as it is created.
    const createInFlight = this.sequencer.awaitingCreated;
    this.sequencer.onSpeechStarted();
    let cancelSent = false;
    if (wasActive && (createInFlight || !this.updates.serverInterruptsResponses)) {
      cancelSent = this.sequencer.cancelActive() !== undefined;
    }
    const interruption = this.truncateHeard(cancelSent);
    this.emitter.emit({
      type: 'speech_started',
      itemId: event.item_id,
      audioStartMs: event.audio_start_ms,
      ...(interruption !== undefined && { interruption }),
    });
  }

  /** Cuts the last assistant item at what the caller heard of it, if they did not hear it all. */
  private truncateHeard(cancelSent: boolean): Interruption | undefined {
    const item = this.assistantAudio.lastItem;
    if (item === undefined || this.options.playback === undefined) return undefined;
    const receivedMs = this.assistantAudio.receivedMs(item, this.updates.outputFormat) ?? 0;
    const played = this.options.playback.playedMs(item);
    if (played === undefined || played >= receivedMs) return undefined;
    const playedMs = Math.max(0, Math.floor(played));
    this.truncate(item, playedMs);
    return { itemId: item, playedMs, cancelSent };
  }

  private handleSpeechStopped(event: ServerEventOf<'input_audio_buffer.speech_stopped'>): void {
    this.sequencer.onSpeechStopped();
    this.emitter.emit({
      type: 'speech_stopped',
      itemId: event.item_id,
      audioEndMs: event.audio_end_ms,
    });
  }

  /** A cleared buffer ends any utterance in progress; no speech_stopped follows it. */
  private handleInputCleared(): void {
    this.sequencer.onSpeechStopped();
  }

  private handleResponseCreated(event: ServerEventOf<'response.created'>): void {
    const responseId = event.response.id;
    if (this.sequencer.hasSeen(responseId)) {
      protocolErrors.inc({ kind: 'repeated_response_created' });
      this.logger.debug('response.created for a response already seen; ignored', {
        responseId: responseId.slice(0, 64),
      });
      return;
    }
    const tag = event.response.metadata?.[CREATE_TAG_KEY];
    if (tag !== undefined) this.providerEchoesMetadata = true;
    // Without an echo from this provider yet, a created while our create is out is ours.
    const ours =
      tag !== undefined ? tag === this.sequencer.pendingCreateTag : !this.providerEchoesMetadata;
    // The handle it answers is created first: its owner knows the response before its events.
    this.sequencer.onResponseCreated(responseId, ours);
    this.emitter.emit({ type: 'response_created', responseId });
  }

  private handleAudioDelta(responseId: string, itemId: string, audio: Buffer): void {
    this.assistantAudio.add(itemId, audio.length);
    this.sequencer.onOutputItem(responseId, itemId);
    this.emitter.emit({ type: 'audio_delta', responseId, itemId, audio });
  }

  private handleAssistantTranscriptDelta(
    event: ServerEventOf<'response.output_audio_transcript.delta'>,
  ): void {
    this.emitter.emit({
      type: 'transcript_delta',
      role: 'assistant',
      itemId: event.item_id,
      responseId: event.response_id,
      delta: event.delta,
    });
  }

  private handleAssistantTranscriptDone(
    event: ServerEventOf<'response.output_audio_transcript.done'>,
  ): void {
    this.emitter.emit({
      type: 'transcript_done',
      role: 'assistant',
      itemId: event.item_id,
      responseId: event.response_id,
      transcript: event.transcript,
    });
  }

  private handleUserTranscriptDelta(
    event: ServerEventOf<'conversation.item.input_audio_transcription.delta'>,
  ): void {
    this.emitter.emit({
      type: 'transcript_delta',
      role: 'user',
      itemId: event.item_id,
      delta: event.delta,
    });
  }

  private handleUserTranscriptDone(
    event: ServerEventOf<'conversation.item.input_audio_transcription.completed'>,
  ): void {
    this.emitter.emit({
      type: 'transcript_done',
      role: 'user',
      itemId: event.item_id,
      transcript: event.transcript,
    });
  }

  private handleFunctionCall(event: ServerEventOf<'response.function_call_arguments.done'>): void {
    const { response_id: responseId, item_id: itemId, call_id: callId, name } = event;
    this.sequencer.onFunctionCall(responseId, callId);
    this.sequencer.onOutputItem(responseId, itemId);
    let args: unknown;
    try {
      args = JSON.parse(event.arguments);
    } catch (error) {
      const reason = (error as Error).message;
      this.emitError(
        new CallgateError('CALLGATE_ERR_MODEL_BAD_TOOL_ARGUMENTS', { callId, name, reason }),
        { callId },
      );
      // The model is owed an output for every call, or the tool turn never completes.
      this.sendToolOutput(callId, {
        error: 'the arguments were not valid JSON; ask the caller again',
      });
      return;
    }
    this.emitter.emit({ type: 'function_call', responseId, itemId, callId, name, arguments: args });
  }

  private handleResponseDone(event: ServerEventOf<'response.done'>): void {
    const response = event.response;
    if (!this.sequencer.isRunning(response.id)) {
      // A duplicate, a done for a response given up as stalled, or one never created: the call
      // layer has had its response_done (or never had a response_created).
      protocolErrors.inc({ kind: 'unknown_response_done' });
      this.logger.debug('response.done for a response that is not running; ignored', {
        responseId: response.id.slice(0, 64),
      });
      return;
    }
    const status: ResponseStatus =
      response.status === 'in_progress' ? 'incomplete' : response.status;
    const callIds = (response.output ?? []).flatMap((item) =>
      item.type === 'function_call' ? [item.call_id] : [],
    );
    responses.inc({ status });
    const reason =
      response.status_details?.reason ?? response.status_details?.error?.code ?? undefined;
    // Emitted while the sequencer still names it active: a listener asking sees this response.
    this.emitter.emit({
      type: 'response_done',
      responseId: response.id,
      status,
      callIds,
      ...(reason !== undefined && { reason }),
    });
    this.sequencer.onResponseDone(response.id, status, callIds, reason);
  }

  private handleItemTruncated(event: ServerEventOf<'conversation.item.truncated'>): void {
    this.emitter.emit({
      type: 'item_truncated',
      itemId: event.item_id,
      audioEndMs: event.audio_end_ms,
    });
  }

  /**
   * The sequencer stopped waiting for a response's done (its cancel is out): the call layer gets
   * the response_done it would have had (failed, with `reason` saying why) so it releases the
   * response, and the next one may start.
   */
  private onResponseGivenUp(
    responseId: string,
    reason: GiveUpReason,
    callIds: readonly string[],
  ): void {
    if (reason === 'stalled') {
      const timeoutMs = this.options.responseStallTimeoutMs ?? RESPONSE_STALL_TIMEOUT_MS;
      this.emitError(
        new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', {
          what: `response.done for ${responseId.slice(0, 64)}`,
          timeoutMs,
        }),
      );
    }
    this.logger.info('realtime response given up', {
      responseId: responseId.slice(0, 64),
      reason,
      providerSessionId: this.sessionId,
    });
    responses.inc({ status: 'failed' });
    this.emitter.emit({
      type: 'response_done',
      responseId,
      status: 'failed',
      reason,
      callIds: [...callIds],
    });
  }

  // ---- session lifetime ----------------------------------------------------------------------

  private startExpiryWarning(): void {
    const limit = this.options.sessionLimitMs ?? SESSION_LIMIT_MS;
    const warning = Math.min(limit, this.options.expiryWarningMs ?? SESSION_EXPIRY_WARNING_MS);
    // One warning per session: a timer already running is replaced, never left to fire as well.
    clearTimeout(this.expiryTimer);
    this.expiryTimer = setTimeout(
      this.guarded('session expiry warning', () =>
        this.emitter.emit({ type: 'session_expiring', remainingMs: warning }),
      ),
      limit - warning,
    );
    this.expiryTimer.unref();
  }

  private onClose({ cause, code, reasonText }: TransportClosed): void {
    const wasConnecting = this.state === 'connecting';
    this.state = 'closed';
    clearTimeout(this.expiryTimer);
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.sequencer.stop();
    const reason: DisconnectReason = cause.reason;
    const detail = reasonText || cause.detail || `close code ${code}`;
    disconnects.inc({ reason });
    this.logger[reason === 'closed' || reason === 'aborted' ? 'debug' : 'info'](
      'realtime session closed',
      {
        reason,
        closeCode: code,
        detail,
        providerSessionId: this.sessionId,
        droppedAudioFrames: this.dropped,
      },
    );
    const failure = new CallgateError(
      reason === 'session_limit'
        ? 'CALLGATE_ERR_MODEL_SESSION_LIMIT'
        : wasConnecting
          ? 'CALLGATE_ERR_MODEL_CONNECT'
          : 'CALLGATE_ERR_MODEL_DISCONNECTED',
      { url: this.options.url, reason: detail },
    );
    this.connectWaiter?.reject(failure);
    this.connectWaiter = undefined;
    this.updates.rejectAll(failure);
    if (!wasConnecting || this.sessionId !== undefined) {
      this.emitter.emit({ type: 'disconnected', reason, detail, closeCode: code });
    }
  }

  // ---- small pieces --------------------------------------------------------------------------

  private protocolError(kind: string, what: string): void {
    protocolErrors.inc({ kind });
    if (this.reportedProtocolErrors >= REPORTED_PROTOCOL_ERRORS) {
      this.logger.debug('realtime protocol error (no longer reported)', {
        kind,
        what: what.slice(0, 200),
      });
      return;
    }
    this.reportedProtocolErrors += 1;
    this.emitError(new CallgateError('CALLGATE_ERR_MODEL_PROTOCOL', { reason: what }));
  }

  /** A timer's callback that cannot throw: an exception there would end the whole gateway. */
  private guarded(what: string, callback: () => void): () => void {
    return () => {
      try {
        callback();
      } catch (error) {
        this.logger.error('realtime timer callback threw', { timer: what, error });
      }
    };
  }

  private emitError(
    error: CallgateError,
    about: { providerCode?: string; callId?: string } = {},
  ): void {
    this.emitter.emit({
      type: 'error',
      code: error.code,
      message: error.message,
      ...(about.providerCode !== undefined && { providerCode: about.providerCode }),
      ...(about.callId !== undefined && { callId: about.callId }),
    });
  }

  private nextEvent(types: RealtimeEventType[], timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const offs: (() => void)[] = [];
      const finish = (): void => {
        clearTimeout(timer);
        for (const off of offs) off();
        resolve();
      };
      const timer = setTimeout(finish, timeoutMs);
      for (const type of types) offs.push(this.emitter.on(type, finish));
    });
  }
}

/** The handle of a request that never reached the sequencer. */
function refusedHandle(reason: 'not_connected'): ResponseHandle {
  const handle = new RequestedResponse();
  handle.markRefused(reason);
  return handle;
}

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
