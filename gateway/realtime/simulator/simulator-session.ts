/**
 * One simulated realtime model session: the server side of the OpenAI GA protocol subset callgate
 * uses, driven by a script instead of a model. It keeps the protocol's rules (one active response,
 * truncation only within the audio produced, the real error codes) so the client is tested against
 * the same refusals it meets in the cloud, and it records what it said and heard for assertions.
 */
import { createHash, randomBytes } from 'node:crypto';
import { DTMF_MESSAGE_PATTERN, bytesPerMs, type AudioFormat } from '../realtime-session.ts';
import {
  WIRE_ERROR,
  type ClientEvent,
  type ItemWire,
  type ResponseWire,
  type ServerEvent,
  type SessionWire,
} from '../openai-protocol.ts';
import { formatFromWire } from '../session-config-wire.ts';
import { decodeAlaw, decodeMulaw, decodePcm16 } from './g711.ts';
import { EnergyVad } from './energy-vad.ts';
import { SIMULATOR_EVENT_TYPES, type SimulatorClientEvent } from './simulator-protocol.ts';
import { renderTemplate, type SimulatorScript, type SimulatorStep } from './simulator-script.ts';
import type { SpeechSynthesizer } from './speech-synthesizer.ts';

/** Audio is streamed in deltas of this length; the provider's deltas are of the same order. */
export const AUDIO_CHUNK_MS = 100;
/**
 * Pause after each function call before the next output (or response.done): a model streams the
 * arguments for a while, so a fast tool can send its output before the response is done.
 */
export const FUNCTION_CALL_GAP_MS = 40;
/** The provider refuses to commit less audio than this. */
export const MIN_COMMIT_MS = 100;
/** The provider's session limit; the call layer re-opens with a context summary. */
export const MAX_SESSION_MS = 60 * 60 * 1000;
/** Wire records kept per session; older ones are dropped so a long demo call cannot grow memory. */
export const MAX_WIRE_RECORDS = 20_000;
/** Conversation items kept; beyond this the oldest are forgotten (and cannot be truncated). */
const MAX_ITEMS = 2_000;

export const SESSION_LIMIT_MESSAGE = 'Your session hit the maximum duration of 60 minutes.';

export interface SaidRecord {
  responseId: string;
  itemId: string;
  text: string;
  /** Session clock when the first audio went out. */
  startedAtMs: number;
  /** Audio sent for this item so far. */
  audioMsSent: number;
  /** Length of the whole rendered line. */
  totalAudioMs: number;
  truncatedAtMs?: number;
  status: 'in_progress' | 'completed' | 'cancelled';
}

export type HeardRecord =
  | { kind: 'utterance'; itemId: string; audioStartMs: number; audioEndMs: number; atMs: number }
  | { kind: 'committed'; itemId: string; audioMs: number; atMs: number }
  | { kind: 'caller_said'; itemId: string; text: string; atMs: number }
  | { kind: 'dtmf'; digit: string; atMs: number }
  | { kind: 'system_message'; text: string; atMs: number }
  | { kind: 'tool_output'; callId: string; output: string; atMs: number };

export interface ToolCallRecord {
  responseId: string;
  callId: string;
  name: string;
  arguments: string;
}

export interface WireRecord {
  direction: 'in' | 'out';
  type: string;
  atMs: number;
  /** The event, with audio payloads replaced by their length. */
  event: Record<string, unknown>;
}

export interface ResponseRecord {
  responseId: string;
  status: 'completed' | 'cancelled';
  reason?: string;
  trigger: 'client' | 'turn_detection' | 'side_channel';
}

export interface SimulatorSessionTransport {
  send(text: string): void;
  close(code: number, reason: string): void;
}

export interface SimulatorSessionOptions {
  script: SimulatorScript;
  synthesizer: Pick<SpeechSynthesizer, 'render'>;
  transport: SimulatorSessionTransport;
  model: string;
  /** Sequential ids and no random values. */
  deterministic?: boolean;
  /** Speech pacing: 1 is real time, 4 is four times faster, 0 sends all audio at once. */
  speechSpeed?: number;
  clock?: () => number;
  /** Keep a record of every event on the wire (tests); off for load runs. */
  recordWire?: boolean;
  /** Fault injection: never answer session.update. */
  ignoreSessionUpdate?: boolean;
  maxSessionMs?: number;
  /** Pause after each function call (FUNCTION_CALL_GAP_MS by default). */
  functionCallGapMs?: number;
}

interface ItemState {
  item: ItemWire;
  /** Audio produced for an assistant audio message. */
  audioMs?: number;
  said?: SaidRecord;
}

interface ActiveResponse {
  id: string;
  abort: AbortController;
  /** The client's response.create metadata, echoed in response.created and response.done. */
  metadata: Record<string, string> | null;
  cancelReason?: 'turn_detected' | 'client_cancelled';
}

interface PlannedResponse {
  say?: string;
  tools?: SimulatorStep['tools'];
}

type ErrorParams = {
  code: string;
  message: string;
  param?: string | null;
  eventId?: string | null;
  type?: string;
};

export class SimulatorSession {
  readonly said: SaidRecord[] = [];
  readonly heard: HeardRecord[] = [];
  readonly toolCalls: ToolCallRecord[] = [];
  readonly responses: ResponseRecord[] = [];
  readonly wire: WireRecord[] = [];
  private readonly seq = new Map<string, number>();
  private readonly clock: () => number;
  private readonly startedAt: number;
  private session: SessionWire;
  private vad: EnergyVad | undefined;
  private inputBytes = 0;
  /** All caller audio appended, kept as a digest while the wire is recorded (tests). */
  private readonly inputAudio = createHash('sha256');
  private bufferBytes = 0;
  private speechStartMs = 0;
  private speechItemId: string | undefined;
  private readonly items = new Map<string, ItemState>();
  private lastItemId: string | null = null;
  private utteranceCount = 0;
  private pendingStep: SimulatorStep | undefined;
  private readonly pendingOutputs: { name: string; output: string }[] = [];
  private readonly pendingMessages: string[] = [];
  private readonly callNames = new Map<string, string>();
  private greeted = false;
  private audioSent = false;
  private active: ActiveResponse | undefined;
  private closed = false;
  private readonly limitTimer: NodeJS.Timeout;

  constructor(private readonly options: SimulatorSessionOptions) {
    this.clock = options.clock ?? (() => Date.now());
    this.startedAt = this.clock();
    this.session = {
      type: 'realtime',
      object: 'realtime.session',
      id: this.id('sess'),
      model: options.model,
      output_modalities: ['audio'],
      instructions: '',
      audio: {
        input: {
          format: { type: 'audio/pcm', rate: 24000 },
          transcription: null,
          noise_reduction: null,
          turn_detection: {
            type: 'server_vad',
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
            create_response: true,
            interrupt_response: true,
            idle_timeout_ms: null,
          },
        },
        output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'marin', speed: 1 },
      },
      tools: [],
      tool_choice: 'auto',
      max_output_tokens: 'inf',
    };
    this.rebuildVad();
    this.limitTimer = setTimeout(() => this.expire(), options.maxSessionMs ?? MAX_SESSION_MS);
    this.limitTimer.unref();
    this.emit({ type: 'session.created', event_id: this.id('event'), session: this.session });
  }

  get sessionId(): string {
    return this.session.id ?? '';
  }

  get utterances(): number {
    return this.utteranceCount;
  }

  get hasActiveResponse(): boolean {
    return this.active !== undefined;
  }

  /** The effective session configuration, as session.updated reported it. */
  get configuration(): SessionWire {
    return this.session;
  }

  /** SHA-256 (hex) of the caller audio appended so far, in order; empty-input digest without recordWire. */
  inputAudioDigest(): string {
    return this.inputAudio.copy().digest('hex');
  }

  /** Client event types received, in order (audio appends included). */
  receivedTypes(): string[] {
    return this.wire.filter((record) => record.direction === 'in').map((record) => record.type);
  }

  /** One frame from the client. */
  receive(text: string): void {
    if (this.closed) return;
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      this.error({
        code: WIRE_ERROR.invalidJson,
        message:
          "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)",
      });
      return;
    }
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      this.error({ code: WIRE_ERROR.invalidEvent, message: 'The event must be a JSON object.' });
      return;
    }
    const record = event as Record<string, unknown>;
    const type = record.type;
    const eventId = typeof record.event_id === 'string' ? record.event_id : null;
    this.record('in', typeof type === 'string' ? type : '(none)', record);
    if (typeof type !== 'string') {
      this.error({
        code: WIRE_ERROR.missingParameter,
        message: "Missing required parameter: 'type'.",
        param: 'type',
        eventId,
      });
      return;
    }
    try {
      if (SIMULATOR_EVENT_TYPES.has(type))
        this.onSideChannel(record as SimulatorClientEvent, eventId);
      else this.onClientEvent(record as ClientEvent, eventId);
    } catch (error) {
      // A known event with fields of the wrong shape: refused like the provider does, never a crash.
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: `The ${type.slice(0, 64)} event could not be read: ${(error as Error).message}`,
        eventId,
      });
    }
  }

  /** The transport closed (either side). */
  onTransportClosed(): void {
    this.closed = true;
    clearTimeout(this.limitTimer);
    this.active?.abort.abort();
  }

  /** Ends the session as the provider does at its duration limit: an error, then close 1001. */
  expire(): void {
    if (this.closed) return;
    this.error({ code: WIRE_ERROR.sessionExpired, message: SESSION_LIMIT_MESSAGE });
    this.options.transport.close(1001, SESSION_LIMIT_MESSAGE);
  }

  /** Side channel, server end: the caller said `text` (same as a simulator.caller_said event). */
  callerSays(text: string): void {
    this.receive(JSON.stringify({ type: 'simulator.caller_said', text }));
  }

  /** Side channel, server end: the caller pressed `digit` (same as a simulator.dtmf event). */
  pressDigit(digit: string): void {
    this.receive(JSON.stringify({ type: 'simulator.dtmf', digit }));
  }

  /** Sends a raw frame (fault injection for tests: malformed JSON, unknown events). */
  sendRaw(text: string): void {
    this.options.transport.send(text);
  }

  // ---- client events -------------------------------------------------------------------------

  private onClientEvent(event: ClientEvent, eventId: string | null): void {
    switch (event.type) {
      case 'session.update':
        this.onSessionUpdate(event, eventId);
        return;
      case 'input_audio_buffer.append':
        this.onAppend(event.audio, eventId);
        return;
      case 'input_audio_buffer.commit':
        this.onCommit(eventId);
        return;
      case 'input_audio_buffer.clear':
        this.bufferBytes = 0;
        this.vad?.reset();
        this.speechItemId = undefined;
        this.emit({ type: 'input_audio_buffer.cleared', event_id: this.id('event') });
        return;
      case 'conversation.item.create':
        this.onItemCreate(event.item, eventId);
        return;
      case 'conversation.item.truncate':
        this.onTruncate(event, eventId);
        return;
      case 'conversation.item.delete':
        this.onDelete(event.item_id, eventId);
        return;
      case 'response.create':
        if (this.active !== undefined) {
          this.error({
            code: WIRE_ERROR.activeResponse,
            message: `Conversation already has an active response in progress: ${this.active.id}. Wait until the response is finished before creating a new one.`,
            eventId,
          });
          return;
        }
        this.startResponse('client', responseMetadata(event), responseInstructions(event));
        return;
      case 'response.cancel':
        if (
          this.active === undefined ||
          (event.response_id !== undefined && event.response_id !== this.active.id)
        ) {
          this.error({
            code: WIRE_ERROR.cancelNotActive,
            message: 'Cancellation failed: no active response found',
            eventId,
          });
          return;
        }
        this.cancelActive('client_cancelled');
        return;
      default: {
        const type = (event as { type: string }).type;
        this.error({
          code: WIRE_ERROR.invalidValue,
          message: `Invalid value: '${type.slice(0, 64)}'. Supported values are: 'session.update', 'input_audio_buffer.append', 'input_audio_buffer.commit', 'input_audio_buffer.clear', 'conversation.item.create', 'conversation.item.truncate', 'conversation.item.delete', 'response.create', and 'response.cancel'.`,
          param: 'type',
          eventId,
        });
      }
    }
  }

  private onSessionUpdate(
    event: Extract<ClientEvent, { type: 'session.update' }>,
    eventId: string | null,
  ): void {
    const update = (event as { session?: unknown }).session;
    if (typeof update !== 'object' || update === null) {
      this.error({
        code: WIRE_ERROR.missingParameter,
        message: "Missing required parameter: 'session'.",
        param: 'session',
        eventId,
      });
      return;
    }
    const next = update as SessionWire;
    if (next.type !== 'realtime') {
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: `Invalid value: '${String(next.type)}'. Supported values are: 'realtime'.`,
        param: 'session.type',
        eventId,
      });
      return;
    }
    for (const [path, format] of [
      ['session.audio.input.format', next.audio?.input?.format],
      ['session.audio.output.format', next.audio?.output?.format],
    ] as const) {
      if (format === undefined) continue;
      const known =
        format.type === 'audio/pcmu' ||
        format.type === 'audio/pcma' ||
        (format.type === 'audio/pcm' && (format.rate ?? 24000) === 24000);
      if (!known) {
        this.error({
          code: WIRE_ERROR.invalidValue,
          message: `Invalid value for '${path}': ${JSON.stringify(format)}.`,
          param: path,
          eventId,
        });
        return;
      }
    }
    const voice = next.audio?.output?.voice;
    if (voice !== undefined && voice !== this.session.audio?.output?.voice && this.audioSent) {
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: "Cannot update a conversation's voice if assistant audio is present.",
        param: 'session.audio.output.voice',
        eventId,
      });
      return;
    }
    if (this.options.ignoreSessionUpdate === true) return;
    const input = { ...this.session.audio?.input, ...next.audio?.input };
    const output = { ...this.session.audio?.output, ...next.audio?.output };
    this.session = {
      ...this.session,
      ...(next.instructions !== undefined && { instructions: next.instructions }),
      ...(next.output_modalities !== undefined && { output_modalities: next.output_modalities }),
      ...(next.tools !== undefined && { tools: next.tools }),
      ...(next.tool_choice !== undefined && { tool_choice: next.tool_choice }),
      audio: { input, output },
    };
    this.rebuildVad();
    this.emit({ type: 'session.updated', event_id: this.id('event'), session: this.session });
  }

  private onAppend(audio: unknown, eventId: string | null): void {
    if (typeof audio !== 'string') {
      this.error({
        code: WIRE_ERROR.missingParameter,
        message: "Missing required parameter: 'audio'.",
        param: 'audio',
        eventId,
      });
      return;
    }
    const recorded = this.options.recordWire !== false;
    if (this.vad === undefined && !recorded) {
      // Without turn detection only the length matters; skip decoding (many calls in one process).
      const length = base64Length(audio);
      this.inputBytes += length;
      this.bufferBytes += length;
      return;
    }
    const bytes = Buffer.from(audio, 'base64');
    if (recorded) this.inputAudio.update(bytes);
    this.inputBytes += bytes.length;
    this.bufferBytes += bytes.length;
    if (this.vad === undefined) return;
    const format = this.inputFormat();
    const samples =
      format === 'pcmu'
        ? decodeMulaw(bytes)
        : format === 'pcma'
          ? decodeAlaw(bytes)
          : decodePcm16(bytes);
    for (const transition of this.vad.push(samples)) {
      if (transition.type === 'start') this.onSpeechStarted(transition.atMs);
      else this.onSpeechStopped(transition.atMs);
    }
  }

  private onSpeechStarted(atMs: number): void {
    this.speechItemId = this.id('item');
    this.speechStartMs = atMs;
    this.emit({
      type: 'input_audio_buffer.speech_started',
      event_id: this.id('event'),
      audio_start_ms: atMs,
      item_id: this.speechItemId,
    });
    const turn = this.session.audio?.input?.turn_detection;
    if (
      this.active !== undefined &&
      turn !== null &&
      turn !== undefined &&
      (turn.interrupt_response ?? true)
    ) {
      this.cancelActive('turn_detected');
    }
  }

  private onSpeechStopped(atMs: number): void {
    const itemId = this.speechItemId ?? this.id('item');
    this.speechItemId = undefined;
    this.emit({
      type: 'input_audio_buffer.speech_stopped',
      event_id: this.id('event'),
      audio_end_ms: atMs,
      item_id: itemId,
    });
    this.commitUserAudio(itemId);
    this.heard.push({
      kind: 'utterance',
      itemId,
      audioStartMs: this.speechStartMs,
      audioEndMs: atMs,
      atMs: this.now(),
    });
    this.countUtterance();
    const turn = this.session.audio?.input?.turn_detection;
    if (
      turn !== null &&
      turn !== undefined &&
      (turn.create_response ?? true) &&
      this.active === undefined
    ) {
      this.startResponse('turn_detection');
    }
  }

  private onCommit(eventId: string | null): void {
    const bufferedMs = this.bufferBytes / bytesPerMs(this.inputFormat());
    if (bufferedMs < MIN_COMMIT_MS) {
      this.error({
        code: WIRE_ERROR.commitEmpty,
        message: `Error committing input audio buffer: buffer too small. Expected at least ${MIN_COMMIT_MS}ms of audio, but buffer only has ${bufferedMs.toFixed(2)}ms of audio.`,
        eventId,
      });
      return;
    }
    const itemId = this.speechItemId ?? this.id('item');
    this.speechItemId = undefined;
    this.vad?.reset();
    this.commitUserAudio(itemId);
    this.heard.push({
      kind: 'committed',
      itemId,
      audioMs: Math.floor(bufferedMs),
      atMs: this.now(),
    });
    this.countUtterance();
  }

  private commitUserAudio(itemId: string): void {
    this.bufferBytes = 0;
    this.emit({
      type: 'input_audio_buffer.committed',
      event_id: this.id('event'),
      previous_item_id: this.lastItemId,
      item_id: itemId,
    });
    this.addItem({
      type: 'message',
      id: itemId,
      object: 'realtime.item',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_audio', transcript: null }],
    });
  }

  private onItemCreate(item: unknown, eventId: string | null): void {
    if (typeof item !== 'object' || item === null) {
      this.error({
        code: WIRE_ERROR.missingParameter,
        message: "Missing required parameter: 'item'.",
        param: 'item',
        eventId,
      });
      return;
    }
    const wire = item as ItemWire;
    if (wire.id !== undefined && this.items.has(wire.id)) {
      this.error({
        code: 'item_id_already_exists',
        message: `Item with id '${wire.id}' already exists.`,
        param: 'item.id',
        eventId,
      });
      return;
    }
    if (wire.type === 'function_call_output') {
      const name = this.callNames.get(wire.call_id);
      if (name === undefined) {
        this.error({
          code: WIRE_ERROR.invalidValue,
          message: `Tool call ID '${String(wire.call_id)}' not found in conversation.`,
          param: 'item.call_id',
          eventId,
        });
        return;
      }
      const output = typeof wire.output === 'string' ? wire.output : JSON.stringify(wire.output);
      this.addItem({
        ...wire,
        id: wire.id ?? this.id('item'),
        object: 'realtime.item',
        status: 'completed',
      });
      this.heard.push({ kind: 'tool_output', callId: wire.call_id, output, atMs: this.now() });
      this.pendingOutputs.push({ name, output });
      return;
    }
    if (wire.type === 'message') {
      if (!Array.isArray(wire.content)) {
        this.error({
          code: WIRE_ERROR.missingParameter,
          message: "Missing required parameter: 'item.content'.",
          param: 'item.content',
          eventId,
        });
        return;
      }
      this.addItem({
        ...wire,
        id: wire.id ?? this.id('item'),
        object: 'realtime.item',
        status: 'completed',
      });
      const text = wire.content
        .flatMap((part) =>
          part.type === 'input_text' || part.type === 'output_text' ? [part.text] : [],
        )
        .join(' ');
      const dtmf = DTMF_MESSAGE_PATTERN.exec(text);
      if (wire.role === 'system' && dtmf?.[1] !== undefined) {
        this.onDigit(dtmf[1]);
      } else if (wire.role === 'system') {
        this.heard.push({ kind: 'system_message', text, atMs: this.now() });
        this.pendingMessages.push(text);
      } else if (wire.role === 'user') {
        this.heard.push({
          kind: 'caller_said',
          itemId: wire.id ?? this.lastItemId ?? '',
          text,
          atMs: this.now(),
        });
        this.countUtterance();
      }
      return;
    }
    if (wire.type === 'function_call') {
      this.addItem({
        ...wire,
        id: wire.id ?? this.id('item'),
        object: 'realtime.item',
        status: 'completed',
      });
      this.callNames.set(wire.call_id, wire.name);
      return;
    }
    this.error({
      code: WIRE_ERROR.invalidValue,
      message: `Invalid value: '${String((wire as { type?: unknown }).type)}'. Supported values are: 'message', 'function_call', and 'function_call_output'.`,
      param: 'item.type',
      eventId,
    });
  }

  private onTruncate(
    event: Extract<ClientEvent, { type: 'conversation.item.truncate' }>,
    eventId: string | null,
  ): void {
    const state = typeof event.item_id === 'string' ? this.items.get(event.item_id) : undefined;
    if (state === undefined) {
      this.error({
        code: WIRE_ERROR.truncateUnknownItem,
        message: `Item with item_id not found: ${String(event.item_id)}`,
        param: 'item_id',
        eventId,
      });
      return;
    }
    if (
      state.item.type !== 'message' ||
      state.item.role !== 'assistant' ||
      state.audioMs === undefined
    ) {
      this.error({
        code: WIRE_ERROR.unsupportedContent,
        message: 'Only model output audio messages can be truncated',
        param: 'item_id',
        eventId,
      });
      return;
    }
    if (event.content_index !== 0) {
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: `Invalid 'content_index': ${String(event.content_index)}. The item has one content part.`,
        param: 'content_index',
        eventId,
      });
      return;
    }
    if (typeof event.audio_end_ms !== 'number' || !Number.isInteger(event.audio_end_ms)) {
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: "Invalid type for 'audio_end_ms': expected an integer.",
        param: 'audio_end_ms',
        eventId,
      });
      return;
    }
    if (event.audio_end_ms < 0) {
      this.error({
        code: WIRE_ERROR.belowMin,
        message: `Invalid 'audio_end_ms': integer below minimum value. Expected a value >= 0, but got ${event.audio_end_ms} instead.`,
        param: 'audio_end_ms',
        eventId,
      });
      return;
    }
    if (event.audio_end_ms > state.audioMs) {
      this.error({
        code: WIRE_ERROR.invalidValue,
        message: `Audio content of ${state.audioMs}ms is already shorter than ${event.audio_end_ms}ms`,
        param: 'audio_end_ms',
        eventId,
      });
      return;
    }
    state.audioMs = event.audio_end_ms;
    if (state.said !== undefined) state.said.truncatedAtMs = event.audio_end_ms;
    this.emit({
      type: 'conversation.item.truncated',
      event_id: this.id('event'),
      item_id: event.item_id,
      content_index: 0,
      audio_end_ms: event.audio_end_ms,
    });
  }

  private onDelete(itemId: unknown, eventId: string | null): void {
    if (typeof itemId !== 'string' || !this.items.delete(itemId)) {
      this.error({
        code: 'item_delete_invalid_item_id',
        message: `Item with item_id not found: ${String(itemId)}`,
        param: 'item_id',
        eventId,
      });
      return;
    }
    this.emit({ type: 'conversation.item.deleted', event_id: this.id('event'), item_id: itemId });
  }

  private onSideChannel(event: SimulatorClientEvent, eventId: string | null): void {
    if (event.type === 'simulator.dtmf') {
      if (typeof event.digit !== 'string' || !/^[0-9A-D*#]$/.test(event.digit)) {
        this.error({
          code: WIRE_ERROR.invalidValue,
          message: 'simulator.dtmf needs one digit of 0-9, *, #, A-D',
          param: 'digit',
          eventId,
        });
        return;
      }
      this.onDigit(event.digit);
    } else {
      if (typeof event.text !== 'string' || event.text.length === 0) {
        this.error({
          code: WIRE_ERROR.missingParameter,
          message: "Missing required parameter: 'text'.",
          param: 'text',
          eventId,
        });
        return;
      }
      // The scripted text stands for speech: it becomes a committed caller audio item whose
      // transcript is the text, as the provider reports it when transcription is on.
      const itemId = this.id('item');
      this.emit({
        type: 'input_audio_buffer.committed',
        event_id: this.id('event'),
        previous_item_id: this.lastItemId,
        item_id: itemId,
      });
      this.addItem({
        type: 'message',
        id: itemId,
        object: 'realtime.item',
        status: 'completed',
        role: 'user',
        content: [{ type: 'input_audio', transcript: null }],
      });
      if (this.session.audio?.input?.transcription) {
        this.emit({
          type: 'conversation.item.input_audio_transcription.delta',
          event_id: this.id('event'),
          item_id: itemId,
          content_index: 0,
          delta: event.text,
        });
        this.emit({
          type: 'conversation.item.input_audio_transcription.completed',
          event_id: this.id('event'),
          item_id: itemId,
          content_index: 0,
          transcript: event.text,
        });
      }
      this.heard.push({ kind: 'caller_said', itemId, text: event.text, atMs: this.now() });
      this.countUtterance();
    }
    const turn = this.session.audio?.input?.turn_detection;
    if (
      turn !== null &&
      turn !== undefined &&
      (turn.create_response ?? true) &&
      this.active === undefined
    ) {
      this.startResponse('side_channel');
    }
  }

  private onDigit(digit: string): void {
    this.heard.push({ kind: 'dtmf', digit, atMs: this.now() });
    const step = this.options.script.digits[digit];
    if (step !== undefined) this.pendingStep = step;
  }

  private countUtterance(): void {
    this.utteranceCount += 1;
    const step = this.options.script.utterances[String(this.utteranceCount)];
    if (step !== undefined) this.pendingStep = step;
  }

  // ---- responses ---------------------------------------------------------------------------

  private plan(instructions?: string): PlannedResponse {
    const wasGreeted = this.greeted;
    this.greeted = true;
    if (this.pendingStep !== undefined) {
      const step = this.pendingStep;
      this.pendingStep = undefined;
      return {
        ...(step.say !== undefined && { say: step.say }),
        ...(step.tools !== undefined && { tools: step.tools }),
      };
    }
    if (this.pendingOutputs.length > 0) {
      const lines = this.pendingOutputs.splice(0).map(({ name, output }) => {
        const template =
          this.options.script.toolOutputs[name] ??
          this.options.script.toolOutputs.default ??
          '{output}';
        return renderTemplate(template, { output, tool: name });
      });
      this.pendingMessages.length = 0;
      return { say: joinLines(lines) };
    }
    if (this.pendingMessages.length > 0) {
      return {
        say: joinLines(
          this.pendingMessages
            .splice(0)
            .map((text) => renderTemplate(this.options.script.systemMessage, { text })),
        ),
      };
    }
    // The simulator does not follow instructions; a line they quote is said as written (a greeting).
    const quoted = instructions === undefined ? undefined : quotedLine(instructions);
    if (quoted !== undefined) return { say: quoted };
    return { say: wasGreeted ? this.options.script.fallback : this.options.script.greeting };
  }

  private startResponse(
    trigger: ResponseRecord['trigger'],
    metadata: Record<string, string> | null = null,
    instructions?: string,
  ): void {
    const active: ActiveResponse = { id: this.id('resp'), abort: new AbortController(), metadata };
    this.active = active;
    const planned = this.plan(instructions);
    this.emit({
      type: 'response.created',
      event_id: this.id('event'),
      response: this.responseWire(active, 'in_progress', []),
    });
    this.runResponse(active, planned)
      .catch(() => undefined)
      .finally(() => {
        if (this.active === active) this.active = undefined;
        const status = active.cancelReason === undefined ? 'completed' : 'cancelled';
        this.responses.push({
          responseId: active.id,
          status,
          trigger,
          ...(active.cancelReason !== undefined && { reason: active.cancelReason }),
        });
      });
  }

  private cancelActive(reason: 'turn_detected' | 'client_cancelled'): void {
    const active = this.active;
    if (active === undefined || active.cancelReason !== undefined) return;
    active.cancelReason = reason;
    active.abort.abort();
  }

  private async runResponse(active: ActiveResponse, planned: PlannedResponse): Promise<void> {
    const output: ItemWire[] = [];
    const signal = active.abort.signal;
    if (planned.say !== undefined) {
      const item = await this.speak(active, planned.say, output.length);
      output.push(item);
    }
    for (const call of planned.tools ?? []) {
      if (signal.aborted || this.closed) break;
      output.push(
        this.callTool(active.id, call.name, JSON.stringify(call.arguments), output.length),
      );
      await sleep(this.options.functionCallGapMs ?? FUNCTION_CALL_GAP_MS, signal);
    }
    if (this.closed) return;
    const cancelled = active.cancelReason !== undefined;
    // The response is no longer active from here on: a response.create right after done must pass.
    this.active = undefined;
    this.emit({
      type: 'response.done',
      event_id: this.id('event'),
      response: this.responseWire(
        active,
        cancelled ? 'cancelled' : 'completed',
        output,
        active.cancelReason,
      ),
    });
  }

  private async speak(
    active: ActiveResponse,
    text: string,
    outputIndex: number,
  ): Promise<ItemWire> {
    const signal = active.abort.signal;
    const itemId = this.id('item');
    const format = this.outputFormat();
    const ref = {
      response_id: active.id,
      item_id: itemId,
      output_index: outputIndex,
      content_index: 0,
    };
    const inProgress: ItemWire = {
      type: 'message',
      id: itemId,
      object: 'realtime.item',
      status: 'in_progress',
      role: 'assistant',
      content: [],
    };
    this.emit({
      type: 'response.output_item.added',
      event_id: this.id('event'),
      response_id: active.id,
      output_index: outputIndex,
      item: inProgress,
    });
    const state: ItemState = { item: inProgress, audioMs: 0 };
    this.addItem(inProgress, state);
    this.emit({
      type: 'response.content_part.added',
      event_id: this.id('event'),
      ...ref,
      part: { type: 'output_audio', transcript: '' },
    });
    let audio: Buffer;
    try {
      audio = await this.options.synthesizer.render(text, format);
    } catch {
      // Speech is best effort: a failed render still yields a well-formed (silent) item.
      audio = Buffer.alloc(0);
    }
    const perMs = bytesPerMs(format);
    const said: SaidRecord = {
      responseId: active.id,
      itemId,
      text,
      startedAtMs: this.now(),
      audioMsSent: 0,
      totalAudioMs: Math.floor(audio.length / perMs),
      status: 'in_progress',
    };
    state.said = said;
    this.said.push(said);
    const words = text.split(/\s+/).filter((word) => word.length > 0);
    let wordsSent = 0;
    let transcript = '';
    const chunkBytes = AUDIO_CHUNK_MS * perMs;
    const speed = this.options.speechSpeed ?? 1;
    // Paced against the start time, not chunk by chunk, so timer delays do not add up to drift.
    const pacingStart = performance.now();
    for (
      let offset = 0;
      offset < audio.length && !signal.aborted && !this.closed;
      offset += chunkBytes
    ) {
      const chunk = audio.subarray(offset, offset + chunkBytes);
      this.audioSent = true;
      this.emit({
        type: 'response.output_audio.delta',
        event_id: this.id('event'),
        ...ref,
        delta: chunk.toString('base64'),
      });
      const chunkMs = Math.floor(chunk.length / perMs);
      said.audioMsSent += chunkMs;
      state.audioMs = said.audioMsSent;
      // Transcript words go out in step with the audio that carries them.
      const due = Math.ceil((words.length * (offset + chunk.length)) / audio.length);
      if (due > wordsSent) {
        const delta = (wordsSent === 0 ? '' : ' ') + words.slice(wordsSent, due).join(' ');
        wordsSent = due;
        transcript += delta;
        this.emit({
          type: 'response.output_audio_transcript.delta',
          event_id: this.id('event'),
          ...ref,
          delta,
        });
      }
      if (speed > 0)
        await sleep(pacingStart + said.audioMsSent / speed - performance.now(), signal);
    }
    const cancelled = signal.aborted;
    said.status = cancelled ? 'cancelled' : 'completed';
    if (!cancelled && wordsSent < words.length)
      transcript += (transcript === '' ? '' : ' ') + words.slice(wordsSent).join(' ');
    const done: ItemWire = {
      type: 'message',
      id: itemId,
      object: 'realtime.item',
      status: cancelled ? 'incomplete' : 'completed',
      role: 'assistant',
      content: [{ type: 'output_audio', transcript }],
    };
    state.item = done;
    if (this.closed) return done;
    this.emit({ type: 'response.output_audio.done', event_id: this.id('event'), ...ref });
    this.emit({
      type: 'response.output_audio_transcript.done',
      event_id: this.id('event'),
      ...ref,
      transcript,
    });
    this.emit({
      type: 'response.content_part.done',
      event_id: this.id('event'),
      ...ref,
      part: { type: 'output_audio', transcript },
    });
    this.emit({
      type: 'response.output_item.done',
      event_id: this.id('event'),
      response_id: active.id,
      output_index: outputIndex,
      item: done,
    });
    this.emit({
      type: 'conversation.item.done',
      event_id: this.id('event'),
      previous_item_id: null,
      item: done,
    });
    return done;
  }

  private callTool(responseId: string, name: string, args: string, outputIndex: number): ItemWire {
    const itemId = this.id('item');
    const callId = this.id('call');
    const item: ItemWire = {
      type: 'function_call',
      id: itemId,
      object: 'realtime.item',
      status: 'in_progress',
      call_id: callId,
      name,
      arguments: '',
    };
    this.emit({
      type: 'response.output_item.added',
      event_id: this.id('event'),
      response_id: responseId,
      output_index: outputIndex,
      item,
    });
    this.addItem(item);
    const base = {
      response_id: responseId,
      item_id: itemId,
      output_index: outputIndex,
      call_id: callId,
    };
    this.emit({
      type: 'response.function_call_arguments.delta',
      event_id: this.id('event'),
      ...base,
      delta: args,
    });
    this.emit({
      type: 'response.function_call_arguments.done',
      event_id: this.id('event'),
      ...base,
      name,
      arguments: args,
    });
    const done: ItemWire = { ...item, status: 'completed', arguments: args };
    this.items.set(itemId, { item: done });
    this.emit({
      type: 'response.output_item.done',
      event_id: this.id('event'),
      response_id: responseId,
      output_index: outputIndex,
      item: done,
    });
    this.emit({
      type: 'conversation.item.done',
      event_id: this.id('event'),
      previous_item_id: null,
      item: done,
    });
    this.callNames.set(callId, name);
    this.toolCalls.push({ responseId, callId, name, arguments: args });
    return done;
  }

  private responseWire(
    active: ActiveResponse,
    status: ResponseWire['status'],
    output: ItemWire[],
    reason?: 'turn_detected' | 'client_cancelled',
  ): ResponseWire {
    return {
      id: active.id,
      object: 'realtime.response',
      status,
      status_details: reason === undefined ? null : { type: 'cancelled', reason },
      output,
      conversation_id: `conv_${this.sessionId.slice(5)}`,
      output_modalities: ['audio'],
      metadata: active.metadata,
      usage: null,
    };
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private addItem(item: ItemWire, state: ItemState = { item }): void {
    const id = item.id ?? this.id('item');
    const previous = this.lastItemId;
    this.items.set(id, state);
    this.lastItemId = id;
    if (this.items.size > MAX_ITEMS) {
      const oldest = this.items.keys().next().value;
      if (oldest !== undefined) this.items.delete(oldest);
    }
    this.emit({
      type: 'conversation.item.added',
      event_id: this.id('event'),
      previous_item_id: previous,
      item: { ...item, id },
    });
    if (item.status === 'completed')
      this.emit({
        type: 'conversation.item.done',
        event_id: this.id('event'),
        previous_item_id: previous,
        item: { ...item, id },
      });
  }

  private rebuildVad(): void {
    const turn = this.session.audio?.input?.turn_detection;
    if (turn === null || turn === undefined) {
      this.vad = undefined;
      return;
    }
    const sampleRate = this.inputFormat() === 'pcm24k' ? 24000 : 8000;
    // semantic_vad has no threshold; the energy VAD uses the server_vad defaults for it.
    const threshold = turn.type === 'server_vad' ? turn.threshold : undefined;
    const silenceDurationMs = turn.type === 'server_vad' ? turn.silence_duration_ms : undefined;
    this.vad = new EnergyVad({
      sampleRate,
      ...(threshold !== undefined && { threshold }),
      ...(silenceDurationMs !== undefined && { silenceDurationMs }),
    });
  }

  private inputFormat(): AudioFormat {
    return formatFromWire(this.session.audio?.input?.format) ?? 'pcm24k';
  }

  private outputFormat(): AudioFormat {
    return formatFromWire(this.session.audio?.output?.format) ?? 'pcm24k';
  }

  private error(params: ErrorParams): void {
    this.emit({
      type: 'error',
      event_id: this.id('event'),
      error: {
        type: params.type ?? 'invalid_request_error',
        code: params.code,
        message: params.message,
        param: params.param ?? null,
        event_id: params.eventId ?? null,
      },
    });
  }

  private emit(event: ServerEvent): void {
    if (this.closed) return;
    this.record('out', event.type, event as unknown as Record<string, unknown>);
    this.options.transport.send(JSON.stringify(event));
  }

  private record(direction: 'in' | 'out', type: string, event: Record<string, unknown>): void {
    if (this.options.recordWire === false) return;
    const copy: Record<string, unknown> = { ...event };
    if (type === 'input_audio_buffer.append' && typeof copy.audio === 'string')
      copy.audio = `<${Buffer.from(copy.audio, 'base64').length} bytes>`;
    if (type === 'response.output_audio.delta' && typeof copy.delta === 'string')
      copy.delta = `<${Buffer.from(copy.delta, 'base64').length} bytes>`;
    this.wire.push({ direction, type, atMs: this.now(), event: copy });
    if (this.wire.length > MAX_WIRE_RECORDS)
      this.wire.splice(0, this.wire.length - MAX_WIRE_RECORDS);
  }

  private now(): number {
    return this.clock() - this.startedAt;
  }

  private id(prefix: string): string {
    const next = (this.seq.get(prefix) ?? 0) + 1;
    this.seq.set(prefix, next);
    if (this.options.deterministic === true) return `${prefix}_${String(next).padStart(4, '0')}`;
    return `${prefix}_${randomBytes(12).toString('base64url')}`;
  }
}

function base64Length(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((text.length * 3) / 4) - padding);
}

function joinLines(lines: string[]): string {
  return lines
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .join(' ');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The metadata of a response.create, if it is a map of strings (as the protocol requires). */
function responseMetadata(event: ClientEvent): Record<string, string> | null {
  const metadata = (event as { response?: { metadata?: unknown } }).response?.metadata;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return null;
  const entries = Object.entries(metadata).filter(
    (entry): entry is [string, string] => typeof entry[1] === 'string',
  );
  return entries.length === 0 ? null : Object.fromEntries(entries.slice(0, 16));
}

/** The instructions of a response.create, if any. */
function responseInstructions(event: ClientEvent): string | undefined {
  const instructions = (event as { response?: { instructions?: unknown } }).response?.instructions;
  return typeof instructions === 'string' ? instructions : undefined;
}

/** The text between the first and the last double quote of instructions that quote a line to say. */
function quotedLine(instructions: string): string | undefined {
  const first = instructions.indexOf('"');
  const last = instructions.lastIndexOf('"');
  if (first < 0 || last <= first + 1) return undefined;
  return instructions.slice(first + 1, last);
}
