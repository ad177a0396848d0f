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
 */
import WebSocket, { type RawData } from 'ws';
import { CallgateError } from '../../config/errors.ts';
import { rootLogger, type Logger } from '../../config/log.ts';
import { counter } from '../../config/metrics.ts';
import { SERVER_EVENT_TYPES, WIRE_ERROR, type ClientEvent, type ServerEvent, type SessionWire } from './openai-protocol.ts';
import {
  audioMs,
  dtmfMessage,
  type AudioFormat,
  type DisconnectReason,
  type Interruption,
  type PlaybackPosition,
  type RealtimeEvent,
  type RealtimeEventOf,
  type RealtimeEventType,
  type RealtimeSession,
  type ResponseRequest,
  type ResponseStatus,
  type SessionConfig,
} from './realtime-session.ts';
import { AudioAppendWriter } from './openai-audio-append-writer.ts';
import { AudioDeltaReader } from './openai-audio-delta-reader.ts';
import { ResponseSequencer } from './response-sequencer.ts';
import { serverEventProblem } from './openai-server-event-check.ts';
import { formatFromWire, serverInterruptsResponses, sessionConfigToWire } from './session-config-wire.ts';
import { TypedEventEmitter } from './typed-event-emitter.ts';

/** The provider answers the WebSocket upgrade and sends session.created well within this. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** session.updated normally follows in tens of ms; a server silent this long is broken. */
export const SESSION_UPDATE_TIMEOUT_MS = 5_000;
/** An unanswered response.create is forgotten after this, so the queue cannot stall forever. */
export const RESPONSE_CREATED_TIMEOUT_MS = 10_000;
/**
 * Keepalive: a ping this often keeps NAT and load-balancer idle timers (often 60 s) from closing a
 * quiet socket; a pong missing for PONG_TIMEOUT_MS (below the interval) declares the link dead.
 */
export const PING_INTERVAL_MS = 20_000;
export const PONG_TIMEOUT_MS = 10_000;
/**
 * A response with no server event for this long is given up (its done was lost or the server is
 * stuck), so later responses are not queued forever: it is cancelled and ends as failed. Far
 * above any pause inside a real response, which would otherwise be cut off mid-sentence.
 */
export const RESPONSE_STALL_TIMEOUT_MS = 30_000;
/** A refused create with no response in sight is retried after this (bounded attempts). */
export const REFUSED_CREATE_RETRY_MS = 250;
/** close() waits this long for the close handshake before terminating the socket. */
export const CLOSE_TIMEOUT_MS = 2_000;
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
/** The response.create metadata key that tags our creates. */
const CREATE_TAG_KEY = 'callgate_create';
/** ws send options for the append event (sent as text), made once rather than per frame. */
const TEXT_FRAME = { binary: false } as const;
/** How many assistant items' audio lengths are remembered for truncation clamping. */
const TRACKED_AUDIO_ITEMS = 16;
/** How many client event ids are remembered to attribute server errors to what caused them. */
const TRACKED_CLIENT_EVENTS = 256;
/**
 * Protocol errors (unreadable frames, broken events, unknown types) reported as `error` events per
 * session; beyond this they are only counted and logged at debug, so a peer sending garbage in a
 * loop cannot flood the call layer.
 */
export const REPORTED_PROTOCOL_ERRORS = 32;
/**
 * Responses tracked at once, each with its own stall bound. The server runs one at a time; more
 * means a broken peer, and the oldest is given up rather than tracked without a bound.
 */
const TRACKED_LIVE_RESPONSES = 4;
/** Finished response ids remembered to recognise a replayed response.created. */
const TRACKED_FINISHED_RESPONSES = 16;

const SESSION_LIMIT_TEXT = /maximum duration/i;
const KNOWN_WIRE_ERRORS: ReadonlySet<string> = new Set(Object.values(WIRE_ERROR));

const droppedAudio = counter({ name: 'callgate_realtime_audio_dropped_frames_total', help: 'Caller audio frames dropped by the realtime client (disconnected or send buffer full)' });
const protocolErrors = counter<'kind'>({ name: 'callgate_realtime_protocol_errors_total', help: 'Unreadable or unexpected frames from the realtime model', labelNames: ['kind'] });
const disconnects = counter<'reason'>({ name: 'callgate_realtime_disconnects_total', help: 'Realtime model sessions that ended, by reason', labelNames: ['reason'] });
const responses = counter<'status'>({ name: 'callgate_realtime_responses_total', help: 'Realtime model responses by final status', labelNames: ['status'] });
const serverErrors = counter<'code'>({ name: 'callgate_realtime_server_errors_total', help: 'Error events sent by the realtime model, by code', labelNames: ['code'] });

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

interface Waiter {
  eventId?: string;
  /** The instructions a session.update sent: its session.updated echoes them. */
  instructions?: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

/** A response the server created and has not finished, guarded by its own stall timer. */
interface LiveResponse {
  stallTimer: NodeJS.Timeout;
  /** Function calls it dispatched so far, given on response_done if it is given up. */
  callIds: string[];
}

export class OpenAIRealtimeSession implements RealtimeSession {
  private readonly emitter: TypedEventEmitter<RealtimeEvent>;
  private readonly logger: Logger;
  private readonly sequencer: ResponseSequencer;
  private readonly audioDeltas = new AudioDeltaReader();
  private readonly audioAppends = new AudioAppendWriter();
  private ws: WebSocket | undefined;
  private state: State = 'idle';
  private eventSeq = 0;
  private sessionId: string | undefined;
  private session: SessionWire | undefined;
  private inputFormat: AudioFormat = 'pcmu';
  private outputFormat: AudioFormat = 'pcmu';
  private connectWaiter: Waiter | undefined;
  private readonly updateWaiters: Waiter[] = [];
  private readonly clientEvents = new Map<string, ClientEvent['type']>();
  private readonly audioBytesByItem = new Map<string, number>();
  private lastAudioItem: string | undefined;
  private readonly unknownTypes = new Set<string>();
  private reportedProtocolErrors = 0;
  private readonly liveResponses = new Map<string, LiveResponse>();
  /** Responses recently done or given up, so that a replayed response.created does not revive one. */
  private readonly finishedResponses = new Set<string>();
  private createdTimer: NodeJS.Timeout | undefined;
  /** The tag of our response.create that has no response.created yet. */
  private pendingCreateTag: string | undefined;
  /** The ResponseRequest.tag of that create, given back on its response_created. */
  private pendingRequestTag: string | undefined;
  private createSeq = 0;
  /** Set once a response.created carried our tag back: from then on an untagged one is the server's. */
  private providerEchoesMetadata = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  private awaitingPongSince: number | undefined;
  private closeRequested = false;
  private aborted = false;
  private sessionLimitHit = false;
  private protocolFailure: string | undefined;
  private networkFailure: string | undefined;
  private dropped = 0;
  private reportedDrop = false;
  private readonly onAbort = (): void => {
    this.aborted = true;
    void this.close();
  };

  constructor(private readonly options: OpenAIRealtimeSessionOptions) {
    this.logger = (options.logger ?? rootLogger()).child({ component: 'realtime', provider: 'openai' });
    this.emitter = new TypedEventEmitter<RealtimeEvent>({
      onListenerError: (error, eventType) => this.logger.error('realtime event listener threw', { eventType, error }),
    });
    this.sequencer = new ResponseSequencer({
      sendCreate: (request) => this.sendCreate(request),
      sendCancel: (responseId) => this.send({ type: 'response.cancel', response_id: responseId }),
      ...(options.autoRespondToTools !== undefined && { autoRespondToTools: options.autoRespondToTools }),
      ...(options.maxQueuedResponses !== undefined && { maxQueued: options.maxQueuedResponses }),
    });
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

  on<T extends RealtimeEventType>(type: T, listener: (event: RealtimeEventOf<T>) => void): () => void {
    return this.emitter.on(type, listener);
  }

  onAny(listener: (event: RealtimeEvent) => void): () => void {
    return this.emitter.onAny(listener);
  }

  async connect(): Promise<void> {
    if (this.state !== 'idle') throw new CallgateError('CALLGATE_ERR_MODEL_CONNECT', { url: this.options.url, reason: `session is ${this.state}` });
    this.state = 'connecting';
    const url = new URL(this.options.url);
    url.searchParams.set('model', this.options.model);
    const timeoutMs = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    // GA: Bearer auth only; the beta's OpenAI-Beta header must not be sent.
    const headers: Record<string, string> = {};
    if (this.options.apiKey !== undefined) headers.Authorization = `Bearer ${this.options.apiKey}`;
    const ws = new WebSocket(url, {
      headers,
      maxPayload: this.options.maxFrameBytes ?? MAX_FRAME_BYTES,
      handshakeTimeout: timeoutMs,
      perMessageDeflate: false,
    });
    this.ws = ws;
    ws.on('message', (data, isBinary) => this.onFrame(data, isBinary));
    ws.on('error', (error) => this.onSocketError(error));
    ws.on('close', (code, reason) => this.onClose(code, reason.toString()));
    ws.on('pong', () => {
      this.awaitingPongSince = undefined;
    });
    ws.on('open', () => this.startKeepalive());
    if (this.options.signal !== undefined) {
      if (this.options.signal.aborted) this.onAbort();
      else this.options.signal.addEventListener('abort', this.onAbort, { once: true });
    }
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.connectWaiter = undefined;
        reject(new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: 'session.created', timeoutMs }));
        this.networkFailure = 'no session.created';
        ws.terminate();
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
      inputFormat: this.inputFormat,
      outputFormat: this.outputFormat,
    });
    if (this.state !== 'open') throw new CallgateError('CALLGATE_ERR_MODEL_NOT_CONNECTED', { what: 'session.update' });
    const eventId = this.send({ type: 'session.update', session });
    const timeoutMs = this.options.sessionUpdateTimeoutMs ?? SESSION_UPDATE_TIMEOUT_MS;
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        ...(eventId !== undefined && { eventId }),
        ...(session.instructions !== undefined && { instructions: session.instructions }),
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        this.removeWaiter(waiter);
        const error = new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: 'session.update', timeoutMs });
        this.emitError(error);
        reject(error);
      }, timeoutMs);
      this.updateWaiters.push(waiter);
    });
  }

  sendAudio(audio: Buffer): void {
    const ws = this.ws;
    if (this.state !== 'open' || ws === undefined) {
      this.dropAudio('audio (not connected)');
      return;
    }
    if (ws.bufferedAmount > (this.options.maxSendBufferBytes ?? MAX_SEND_BUFFER_BYTES)) {
      this.dropAudio('audio (send buffer full)');
      return;
    }
    // The hot path (50 frames a second per call): the event is written straight into bytes, in
    // the buffer of the previous frame. Handing ws a Buffer (sent as text) lets it mask into a
    // single frame buffer of its own: one plain socket write per frame rather than a corked
    // header-and-payload pair, and our buffer is free again once send returns. Unless ws or the
    // socket still holds bytes (ws queues a send, or sends a frame whose mask is all zeros
    // unmasked, and the kernel did not take it): those may be ours, so the next frame gets a new one.
    ws.send(this.audioAppends.write(audio), TEXT_FRAME);
    if (ws.bufferedAmount > 0) this.audioAppends.release();
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
    const received = this.audioBytesByItem.get(itemId);
    let audioEndMs = Math.max(0, Math.floor(playedMs));
    if (received !== undefined) {
      const receivedMs = audioMs(this.outputFormat, received);
      // The provider refuses an offset beyond the audio it produced; nothing produced, nothing to cut.
      if (receivedMs === 0) return;
      audioEndMs = Math.min(audioEndMs, receivedMs);
    }
    this.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: audioEndMs });
    if (this.lastAudioItem === itemId) this.lastAudioItem = undefined;
  }

  sendToolOutput(callId: string, output: unknown): void {
    const text = typeof output === 'string' ? output : JSON.stringify(output ?? null);
    if (this.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: callId, output: text } }) === undefined) return;
    this.sequencer.onToolOutput(callId);
  }

  createResponse(request: ResponseRequest = {}): void {
    if (this.state !== 'open') {
      this.emitError(new CallgateError('CALLGATE_ERR_MODEL_NOT_CONNECTED', { what: 'response.create' }), { tag: request.tag });
      return;
    }
    if (this.sequencer.request(request) === 'refused_full') {
      this.emitError(new CallgateError('CALLGATE_ERR_MODEL_BUSY', { limit: this.sequencer.queuedCount, what: 'response.create' }), { tag: request.tag });
    }
  }

  addSystemMessage(text: string): void {
    this.send({ type: 'conversation.item.create', item: { type: 'message', role: 'system', content: [{ type: 'input_text', text }] } });
  }

  sendDtmf(digit: string): void {
    if (!/^[0-9A-D*#]$/.test(digit)) return;
    this.addSystemMessage(dtmfMessage(digit));
    this.createResponse();
  }

  async close(): Promise<void> {
    this.closeRequested = true;
    const ws = this.ws;
    if (ws === undefined || this.state === 'closed') {
      this.state = 'closed';
      return;
    }
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    ws.close(1000, 'closed by callgate');
    const timer = setTimeout(() => ws.terminate(), CLOSE_TIMEOUT_MS);
    await closed;
    clearTimeout(timer);
  }

  // ---- outgoing ----------------------------------------------------------------------------

  /** Sends a client event; returns its event id, or undefined when nothing went out. */
  private send(event: ClientEvent, track = true): string | undefined {
    const ws = this.ws;
    if (this.state !== 'open' || ws === undefined) return undefined;
    let eventId: string | undefined;
    if (track) {
      eventId = `evt_cg_${(++this.eventSeq).toString(36)}`;
      event.event_id = eventId;
      this.clientEvents.set(eventId, event.type);
      if (this.clientEvents.size > TRACKED_CLIENT_EVENTS) {
        const oldest = this.clientEvents.keys().next().value;
        if (oldest !== undefined) this.clientEvents.delete(oldest);
      }
    }
    ws.send(JSON.stringify(event));
    return eventId ?? '';
  }

  private sendCreate(request: ResponseRequest): string {
    // Tagged so that response.created tells our response from one the server started on its own
    // at the same moment (server VAD); the provider echoes a response's metadata.
    this.pendingCreateTag = `c${(++this.createSeq).toString(36)}`;
    this.pendingRequestTag = request.tag;
    const response = {
      ...(request.instructions !== undefined && { instructions: request.instructions }),
      metadata: { [CREATE_TAG_KEY]: this.pendingCreateTag },
    };
    const eventId = this.send({ type: 'response.create', response }) ?? '';
    clearTimeout(this.createdTimer);
    const timeoutMs = this.options.responseCreatedTimeoutMs ?? RESPONSE_CREATED_TIMEOUT_MS;
    this.createdTimer = setTimeout(
      this.guarded('response.created timeout', () => {
        const dropped = this.giveUpCreate(eventId);
        this.emitError(new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: 'response.create', timeoutMs }), { tag: dropped?.tag });
      }),
      timeoutMs,
    );
    return eventId;
  }

  /** Stops waiting for a create's response.created; the sequencer may send the next one at once. */
  private giveUpCreate(eventId: string): ResponseRequest | undefined {
    clearTimeout(this.createdTimer);
    this.pendingCreateTag = undefined;
    this.pendingRequestTag = undefined;
    return this.sequencer.onCreateFailed(eventId);
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
      this.refreshLiveResponses();
      this.onAudioDelta(delta.responseId, delta.itemId, delta.audio);
      return;
    }
    let event: unknown;
    try {
      event = JSON.parse(rawText(data));
    } catch (error) {
      this.protocolError('malformed_json', `a frame that is not JSON (${(error as Error).message})`);
      return;
    }
    if (typeof event !== 'object' || event === null || typeof (event as { type?: unknown }).type !== 'string') {
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
    this.refreshLiveResponses();
    try {
      this.dispatch(event as ServerEvent);
    } catch (error) {
      // A known type with a shape we did not expect (missing fields): reported, never fatal.
      this.protocolError('bad_shape', `a ${type} event that could not be read (${(error as Error).message})`);
    }
  }

  private dispatch(event: ServerEvent): void {
    switch (event.type) {
      case 'session.created':
        if (this.state !== 'connecting') {
          // One session per socket: a second one would restart the expiry warning, not a session.
          this.protocolError('repeated_session_created', 'a second session.created');
          return;
        }
        this.sessionId = event.session.id;
        this.applySession(event.session);
        this.state = 'open';
        this.startExpiryWarning();
        this.connectWaiter?.resolve();
        this.connectWaiter = undefined;
        return;
      case 'session.updated':
        this.onSessionUpdated(event.session);
        return;
      case 'error':
        this.onServerError(event.error);
        return;
      case 'input_audio_buffer.speech_started':
        this.onSpeechStarted(event.item_id, event.audio_start_ms);
        return;
      case 'input_audio_buffer.speech_stopped':
        this.sequencer.onSpeechStopped();
        this.emitter.emit({ type: 'speech_stopped', itemId: event.item_id, audioEndMs: event.audio_end_ms });
        return;
      case 'input_audio_buffer.cleared':
        // A cleared buffer ends any utterance in progress; no speech_stopped follows it.
        this.sequencer.onSpeechStopped();
        return;
      case 'response.created': {
        if (this.liveResponses.has(event.response.id) || this.finishedResponses.has(event.response.id)) {
          protocolErrors.inc({ kind: 'repeated_response_created' });
          this.logger.debug('response.created for a response already seen; ignored', { responseId: event.response.id.slice(0, 64) });
          return;
        }
        const tag = event.response.metadata?.[CREATE_TAG_KEY];
        if (tag !== undefined) this.providerEchoesMetadata = true;
        // Without an echo from this provider yet, a created while our create is out is ours.
        const ours = tag !== undefined ? tag === this.pendingCreateTag : !this.providerEchoesMetadata;
        const requestTag = ours ? this.pendingRequestTag : undefined;
        if (ours) {
          clearTimeout(this.createdTimer);
          this.pendingCreateTag = undefined;
          this.pendingRequestTag = undefined;
        }
        this.sequencer.onResponseCreated(event.response.id, ours);
        // After the sequencer knows it: a response given up to make room must not free the
        // sequencer for a create while this one runs.
        this.watchResponse(event.response.id);
        this.emitter.emit({ type: 'response_created', responseId: event.response.id, ...(requestTag !== undefined && { tag: requestTag }) });
        return;
      }
      case 'response.output_audio.delta':
        this.onAudioDelta(event.response_id, event.item_id, Buffer.from(event.delta, 'base64'));
        return;
      case 'response.output_audio_transcript.delta':
        this.emitter.emit({ type: 'transcript_delta', role: 'assistant', itemId: event.item_id, responseId: event.response_id, delta: event.delta });
        return;
      case 'response.output_audio_transcript.done':
        this.emitter.emit({ type: 'transcript_done', role: 'assistant', itemId: event.item_id, responseId: event.response_id, transcript: event.transcript });
        return;
      case 'conversation.item.input_audio_transcription.delta':
        this.emitter.emit({ type: 'transcript_delta', role: 'user', itemId: event.item_id, delta: event.delta });
        return;
      case 'conversation.item.input_audio_transcription.completed':
        this.emitter.emit({ type: 'transcript_done', role: 'user', itemId: event.item_id, transcript: event.transcript });
        return;
      case 'response.function_call_arguments.done':
        this.onFunctionCall(event.response_id, event.item_id, event.call_id, event.name, event.arguments);
        return;
      case 'response.done':
        this.onResponseDone(event);
        return;
      case 'conversation.item.truncated':
        this.emitter.emit({ type: 'item_truncated', itemId: event.item_id, audioEndMs: event.audio_end_ms });
        return;
      default:
        // Known events callgate does not act on (content parts, item lifecycle, rate limits).
        return;
    }
  }

  private onAudioDelta(responseId: string, itemId: string, audio: Buffer): void {
    this.trackAudio(itemId, audio.length);
    this.emitter.emit({ type: 'audio_delta', responseId, itemId, audio });
  }

  /**
   * The protocol does not echo a session.update's event_id on its session.updated, but the
   * effective configuration it carries includes the instructions that update sent: the update
   * answered is the oldest waiting one with those instructions (the oldest of all when the server
   * leaves them out). A session.updated that answers no waiting configure() resolves nothing.
   */
  private onSessionUpdated(session: SessionWire): void {
    // Whatever it answers, it is the server's word on its current configuration.
    this.applySession(session);
    const echoed = session.instructions;
    const waiter = this.updateWaiters.find((w) => echoed === undefined || w.instructions === undefined || w.instructions === echoed);
    if (waiter === undefined) {
      protocolErrors.inc({ kind: 'unsolicited_session_updated' });
      this.logger.debug('session.updated that answers no waiting session.update; not taken as an answer', { waiting: this.updateWaiters.length });
      return;
    }
    this.removeWaiter(waiter);
    waiter.resolve();
  }

  private applySession(session: SessionWire): void {
    this.session = session;
    // Without turn detection no speech_stopped will come: do not keep holding responses for one.
    if (session.audio?.input?.turn_detection === null) this.sequencer.onSpeechStopped();
    this.inputFormat = formatFromWire(session.audio?.input?.format) ?? this.inputFormat;
    this.outputFormat = formatFromWire(session.audio?.output?.format) ?? this.outputFormat;
  }

  private onServerError(error: Extract<ServerEvent, { type: 'error' }>['error']): void {
    const code = error.code ?? error.type;
    // Only codes callgate knows become label values: a peer cannot grow the metric's cardinality.
    serverErrors.inc({ code: KNOWN_WIRE_ERRORS.has(code) ? code : 'other' });
    // The event it answers; a server may also leave event_id out.
    const eventId = error.event_id ?? null;
    const causeType = eventId === null ? undefined : this.clientEvents.get(eventId);
    if (code === WIRE_ERROR.activeResponse) {
      if (eventId !== null) {
        clearTimeout(this.createdTimer);
        const dropped = this.sequencer.onCreateRefused(eventId);
        if (dropped !== undefined) {
          this.emitError(new CallgateError('CALLGATE_ERR_MODEL_BUSY', { limit: 0, what: 'a response that was refused repeatedly' }), { tag: dropped.tag });
        }
        if (!this.sequencer.isActive) {
          clearTimeout(this.retryTimer);
          this.retryTimer = setTimeout(
            this.guarded('create retry', () => this.sequencer.retry()),
            REFUSED_CREATE_RETRY_MS,
          );
        }
      }
      this.logger.debug('response.create refused while a response is active; queued again', { eventId });
      return;
    }
    if (code === WIRE_ERROR.cancelNotActive) {
      // The response finished on its own while our cancel was in flight: nothing to do.
      this.logger.debug('response.cancel arrived after the response finished');
      return;
    }
    if (code === WIRE_ERROR.sessionExpired || SESSION_LIMIT_TEXT.test(error.message)) {
      // Expected at 60 minutes; the provider closes next. Close ourselves in case it does not.
      this.sessionLimitHit = true;
      this.ws?.close(1000, 'session limit reached');
      return;
    }
    const rejected = new CallgateError('CALLGATE_ERR_MODEL_REJECTED', { what: causeType ?? 'an event', providerCode: code, reason: error.message });
    this.logger.warn('realtime model refused an event', { code: rejected.code, providerCode: code, what: causeType, providerSessionId: this.sessionId });
    const waiter = this.updateWaiters.find((w) => w.eventId !== undefined && w.eventId === eventId);
    if (waiter !== undefined) {
      this.removeWaiter(waiter);
      waiter.reject(rejected);
    }
    // A create refused for anything but an active response gets no response: its waiter is told.
    const dropped = causeType === 'response.create' && eventId !== null ? this.giveUpCreate(eventId) : undefined;
    this.emitError(rejected, { providerCode: code, tag: dropped?.tag });
  }

  private onSpeechStarted(itemId: string, audioStartMs: number): void {
    const wasActive = this.sequencer.isActive;
    // A create still in flight becomes a response after the caller started speaking, which the
    // server's interrupt_response does not cover: it is cancelled as soon as it is created.
    const createInFlight = this.sequencer.awaitingCreated;
    this.sequencer.onSpeechStarted();
    let cancelSent = false;
    if (wasActive && (createInFlight || !(this.session !== undefined && serverInterruptsResponses(this.session)))) {
      cancelSent = this.sequencer.cancelActive() !== undefined;
    }
    let interruption: Interruption | undefined;
    const item = this.lastAudioItem;
    if (item !== undefined && this.options.playback !== undefined) {
      const receivedMs = audioMs(this.outputFormat, this.audioBytesByItem.get(item) ?? 0);
      const played = this.options.playback.playedMs(item);
      if (played !== undefined && played < receivedMs) {
        const playedMs = Math.max(0, Math.floor(played));
        this.truncate(item, playedMs);
        interruption = { itemId: item, playedMs, cancelSent };
      }
    }
    this.emitter.emit({ type: 'speech_started', itemId, audioStartMs, ...(interruption !== undefined && { interruption }) });
  }

  private onFunctionCall(responseId: string, itemId: string, callId: string, name: string, rawArguments: string): void {
    this.sequencer.onFunctionCall(responseId, callId);
    const live = this.liveResponses.get(responseId);
    if (live !== undefined && !live.callIds.includes(callId)) live.callIds.push(callId);
    let args: unknown;
    try {
      args = JSON.parse(rawArguments);
    } catch (error) {
      const reason = (error as Error).message;
      this.emitError(new CallgateError('CALLGATE_ERR_MODEL_BAD_TOOL_ARGUMENTS', { callId, name, reason }), { callId });
      // The model is owed an output for every call, or the tool turn never completes.
      this.sendToolOutput(callId, { error: 'the arguments were not valid JSON; ask the caller again' });
      return;
    }
    this.emitter.emit({ type: 'function_call', responseId, itemId, callId, name, arguments: args });
  }

  private onResponseDone(event: Extract<ServerEvent, { type: 'response.done' }>): void {
    const response = event.response;
    const live = this.liveResponses.get(response.id);
    if (live === undefined) {
      // A duplicate, a done for a response given up as stalled, or one never created: the call
      // layer has had its response_done (or never had a response_created), and it must not end
      // the guard of the response that is running now.
      protocolErrors.inc({ kind: 'unknown_response_done' });
      this.logger.debug('response.done for a response that is not running; ignored', { responseId: response.id.slice(0, 64) });
      return;
    }
    this.finishResponse(response.id, live);
    const status: ResponseStatus = response.status === 'in_progress' ? 'incomplete' : response.status;
    const callIds = (response.output ?? []).flatMap((item) => (item.type === 'function_call' ? [item.call_id] : []));
    responses.inc({ status });
    const reason = response.status_details?.reason ?? response.status_details?.error?.code ?? undefined;
    this.emitter.emit({ type: 'response_done', responseId: response.id, status, callIds, ...(reason !== undefined && { reason }) });
    this.sequencer.onResponseDone(response.id, status, callIds);
  }

  private watchResponse(responseId: string): void {
    if (this.liveResponses.size >= TRACKED_LIVE_RESPONSES) {
      const oldest = this.liveResponses.keys().next().value;
      if (oldest !== undefined) this.giveUpResponse(oldest, 'superseded');
    }
    const timeoutMs = this.options.responseStallTimeoutMs ?? RESPONSE_STALL_TIMEOUT_MS;
    const stallTimer = setTimeout(
      this.guarded('response stall bound', () => {
        this.emitError(new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', { what: `response.done for ${responseId.slice(0, 64)}`, timeoutMs }));
        this.giveUpResponse(responseId, 'stalled');
      }),
      timeoutMs,
    );
    this.liveResponses.set(responseId, { stallTimer, callIds: [] });
  }

  /**
   * Stops waiting for a response's done: the call layer gets the response_done it would have had
   * (failed, with `reason` saying why) so it releases the response, and the next one may start.
   */
  private giveUpResponse(responseId: string, reason: 'stalled' | 'superseded'): void {
    const live = this.liveResponses.get(responseId);
    if (live === undefined) return;
    this.finishResponse(responseId, live);
    this.logger.info('realtime response given up', { responseId: responseId.slice(0, 64), reason, providerSessionId: this.sessionId });
    // If the server is still running it (its events were lost, not its work), the cancel ends it
    // before our next create arrives; if it is long gone, the answer is a benign
    // response_cancel_not_active and a late done is ignored.
    this.send({ type: 'response.cancel', response_id: responseId });
    responses.inc({ status: 'failed' });
    this.emitter.emit({ type: 'response_done', responseId, status: 'failed', reason, callIds: live.callIds });
    this.sequencer.onResponseStalled(responseId);
  }

  private finishResponse(responseId: string, live: LiveResponse): void {
    clearTimeout(live.stallTimer);
    this.liveResponses.delete(responseId);
    this.finishedResponses.add(responseId);
    if (this.finishedResponses.size > TRACKED_FINISHED_RESPONSES) {
      const oldest = this.finishedResponses.values().next().value;
      if (oldest !== undefined) this.finishedResponses.delete(oldest);
    }
  }

  private refreshLiveResponses(): void {
    for (const live of this.liveResponses.values()) live.stallTimer.refresh();
  }

  private trackAudio(itemId: string, bytes: number): void {
    this.audioBytesByItem.set(itemId, (this.audioBytesByItem.get(itemId) ?? 0) + bytes);
    this.lastAudioItem = itemId;
    if (this.audioBytesByItem.size > TRACKED_AUDIO_ITEMS) {
      const oldest = this.audioBytesByItem.keys().next().value;
      if (oldest !== undefined) this.audioBytesByItem.delete(oldest);
    }
  }

  // ---- transport ---------------------------------------------------------------------------

  private startKeepalive(): void {
    const period = Math.min(this.options.pingIntervalMs ?? PING_INTERVAL_MS, this.options.pongTimeoutMs ?? PONG_TIMEOUT_MS);
    // The first check comes at a random point of the first period, the others a period apart:
    // sessions opened together (a burst of calls) would otherwise ping in the same millisecond
    // every period, a socket write each and their pongs to read, while every call waits.
    const keepalive = this.guarded('keepalive', () => this.keepalive());
    this.pingTimer = setTimeout(() => {
      keepalive();
      this.pingTimer = setInterval(keepalive, period);
      this.pingTimer.unref();
    }, Math.random() * period);
    this.pingTimer.unref();
  }

  private keepalive(): void {
    const ws = this.ws;
    if (ws === undefined) return;
    const pongTimeout = this.options.pongTimeoutMs ?? PONG_TIMEOUT_MS;
    if (this.awaitingPongSince !== undefined && Date.now() - this.awaitingPongSince >= pongTimeout) {
      this.networkFailure = `no pong within ${pongTimeout} ms`;
      ws.terminate();
      return;
    }
    if (this.awaitingPongSince === undefined) this.awaitingPongSince = Date.now();
    ws.ping();
  }

  private startExpiryWarning(): void {
    const limit = this.options.sessionLimitMs ?? SESSION_LIMIT_MS;
    const warning = Math.min(limit, this.options.expiryWarningMs ?? SESSION_EXPIRY_WARNING_MS);
    // One warning per session: a timer already running is replaced, never left to fire as well.
    clearTimeout(this.expiryTimer);
    this.expiryTimer = setTimeout(
      this.guarded('session expiry warning', () => this.emitter.emit({ type: 'session_expiring', remainingMs: warning })),
      limit - warning,
    );
    this.expiryTimer.unref();
  }

  private onSocketError(error: Error & { code?: string }): void {
    if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
      const limit = this.options.maxFrameBytes ?? MAX_FRAME_BYTES;
      this.protocolFailure = 'frame too large';
      protocolErrors.inc({ kind: 'frame_too_large' });
      this.emitError(new CallgateError('CALLGATE_ERR_MODEL_FRAME_TOO_LARGE', { size: `more than ${limit}`, limit }));
      return;
    }
    this.networkFailure = error.message;
    this.logger.warn('realtime socket error', { error: error.message });
  }

  private onClose(code: number, reasonText: string): void {
    const wasConnecting = this.state === 'connecting';
    this.state = 'closed';
    clearInterval(this.pingTimer);
    clearTimeout(this.expiryTimer);
    clearTimeout(this.createdTimer);
    clearTimeout(this.retryTimer);
    for (const live of this.liveResponses.values()) clearTimeout(live.stallTimer);
    this.liveResponses.clear();
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.sequencer.stop();
    let reason: DisconnectReason;
    if (this.aborted) reason = 'aborted';
    else if (this.closeRequested) reason = 'closed';
    else if (this.sessionLimitHit || SESSION_LIMIT_TEXT.test(reasonText)) reason = 'session_limit';
    else if (this.protocolFailure !== undefined) reason = 'protocol';
    else if (this.networkFailure !== undefined || code === 1006) reason = 'network';
    else reason = 'server_closed';
    const detail = reasonText || this.protocolFailure || this.networkFailure || `close code ${code}`;
    disconnects.inc({ reason });
    this.logger[reason === 'closed' || reason === 'aborted' ? 'debug' : 'info']('realtime session closed', {
      reason,
      closeCode: code,
      detail,
      providerSessionId: this.sessionId,
      droppedAudioFrames: this.dropped,
    });
    const failure = new CallgateError(
      reason === 'session_limit' ? 'CALLGATE_ERR_MODEL_SESSION_LIMIT' : wasConnecting ? 'CALLGATE_ERR_MODEL_CONNECT' : 'CALLGATE_ERR_MODEL_DISCONNECTED',
      { url: this.options.url, reason: detail },
    );
    this.connectWaiter?.reject(failure);
    this.connectWaiter = undefined;
    for (const waiter of this.updateWaiters.splice(0)) waiter.reject(failure);
    if (!wasConnecting || this.sessionId !== undefined) {
      this.emitter.emit({ type: 'disconnected', reason, detail, closeCode: code });
    }
  }

  // ---- small pieces --------------------------------------------------------------------------

  private protocolError(kind: string, what: string): void {
    protocolErrors.inc({ kind });
    if (this.reportedProtocolErrors >= REPORTED_PROTOCOL_ERRORS) {
      this.logger.debug('realtime protocol error (no longer reported)', { kind, what: what.slice(0, 200) });
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

  private emitError(error: CallgateError, about: { providerCode?: string; callId?: string; tag?: string | undefined } = {}): void {
    this.emitter.emit({
      type: 'error',
      code: error.code,
      message: error.message,
      ...(about.providerCode !== undefined && { providerCode: about.providerCode }),
      ...(about.callId !== undefined && { callId: about.callId }),
      ...(about.tag !== undefined && { tag: about.tag }),
    });
  }

  private removeWaiter(waiter: Waiter): void {
    const index = this.updateWaiters.indexOf(waiter);
    if (index >= 0) this.updateWaiters.splice(index, 1);
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

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
