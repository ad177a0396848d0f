/**
 * The provider-neutral face of a realtime speech model session: what the call layer sends
 * (commands) and what it hears back (a discriminated union of events). Provider wire types stay
 * in their own files (openai-protocol.ts); nothing here names a provider event.
 */
import type { ZodType } from 'zod';
import type { ErrorCode } from '../../config/errors.ts';

// ---- configuration ---------------------------------------------------------------------------

/** G.711 passes through untouched; `pcm24k` is 16-bit little-endian mono at 24 kHz. */
export type AudioFormat = 'pcmu' | 'pcma' | 'pcm24k';

export type TurnDetection =
  | {
      type: 'server_vad';
      /** 0..1; higher needs louder audio to count as speech. */
      threshold?: number;
      prefixPaddingMs?: number;
      silenceDurationMs?: number;
      /** The model answers by itself when the caller stops speaking. */
      createResponse?: boolean;
      /** The model cancels its own response when the caller starts speaking. */
      interruptResponse?: boolean;
    }
  | {
      type: 'semantic_vad';
      eagerness?: 'low' | 'medium' | 'high' | 'auto';
      createResponse?: boolean;
      interruptResponse?: boolean;
    };

export interface RealtimeTool {
  name: string;
  description: string;
  /** Arguments schema; sent to the model as JSON schema. */
  parameters: ZodType;
  /** The JSON Schema the tool was declared with: sent as it is instead of one made from `parameters`. */
  jsonSchema?: Readonly<Record<string, unknown>>;
}

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface SessionConfig {
  instructions: string;
  voice?: string;
  tools?: readonly RealtimeTool[];
  toolChoice?: ToolChoice;
  inputFormat?: AudioFormat;
  outputFormat?: AudioFormat;
  /** `null`: no turn detection; the call layer commits audio and asks for responses itself. */
  turnDetection?: TurnDetection | null;
  /** Transcribe the caller's audio (user transcript events); the model name is the provider's. */
  inputTranscriptionModel?: string;
}

export interface ResponseRequest {
  /** Instructions for this response only (e.g. "tell the caller the booking is confirmed"). */
  instructions?: string;
  /**
   * The caller's name for this response: `response_created` carries it back when the provider
   * echoes response metadata (OpenAI and the simulator do), so the response that answers this
   * request is told apart from the follow-up of a tool turn or one the server started itself.
   */
  tag?: string;
}

/** Reports how much of an assistant item the caller has actually heard (the media layer knows). */
export interface PlaybackPosition {
  playedMs(itemId: string): number | undefined;
}

// ---- events ----------------------------------------------------------------------------------

export type ResponseStatus = 'completed' | 'cancelled' | 'failed' | 'incomplete';

export type DisconnectReason =
  /** close() was called. */
  | 'closed'
  /** The provider's maximum session duration: expected; re-open with a context summary. */
  | 'session_limit'
  /** The server closed the socket (any close code other than the session limit). */
  | 'server_closed'
  /** The transport failed (reset, DNS, TLS) or the keepalive went unanswered. */
  | 'network'
  /** The server sent something the client will not read (e.g. a frame above the size limit). */
  | 'protocol'
  /** The call's AbortSignal fired. */
  | 'aborted';

export interface Interruption {
  /** The assistant item whose playout was cut. */
  itemId: string;
  /** Where the item was truncated: what the caller heard of it. */
  playedMs: number;
  /** Whether the client sent a cancel (false when the server already cancelled, or nothing was active). */
  cancelSent: boolean;
}

export type RealtimeEvent =
  | { type: 'speech_started'; itemId: string; audioStartMs: number; interruption?: Interruption }
  | { type: 'speech_stopped'; itemId: string; audioEndMs: number }
  | { type: 'audio_delta'; responseId: string; itemId: string; audio: Buffer }
  | {
      type: 'transcript_delta';
      role: 'assistant' | 'user';
      itemId: string;
      responseId?: string;
      delta: string;
    }
  | {
      type: 'transcript_done';
      role: 'assistant' | 'user';
      itemId: string;
      responseId?: string;
      transcript: string;
    }
  | {
      type: 'function_call';
      responseId: string;
      itemId: string;
      callId: string;
      name: string;
      arguments: unknown;
    }
  | { type: 'response_created'; responseId: string; tag?: string }
  | {
      type: 'response_done';
      responseId: string;
      status: ResponseStatus;
      /**
       * The provider's reason (turn_detected, client_cancelled, an error code), or, with status
       * `failed`, `stalled` when the client gave the response up after its stall bound (or
       * `superseded` when a broken peer ran more responses at once than the client tracks).
       */
      reason?: string;
      /** Function calls this response dispatched, in output order. */
      callIds: string[];
    }
  | { type: 'item_truncated'; itemId: string; audioEndMs: number }
  /** The provider's session limit is near: re-open with a context summary at the next pause. */
  | { type: 'session_expiring'; remainingMs: number }
  /**
   * `tag` names a ResponseRequest this error gave up on: no response will be created for it
   * (refused while busy or too often, not connected, or never answered).
   */
  | {
      type: 'error';
      code: ErrorCode;
      message: string;
      providerCode?: string;
      callId?: string;
      tag?: string;
    }
  | { type: 'disconnected'; reason: DisconnectReason; detail: string; closeCode?: number };

export type RealtimeEventType = RealtimeEvent['type'];
export type RealtimeEventOf<T extends RealtimeEventType> = Extract<RealtimeEvent, { type: T }>;

// ---- the session -----------------------------------------------------------------------------

export interface RealtimeSession {
  /**
   * The response the model is running, once the provider said which (not while a create awaits
   * its answer). The session's sequencer is the one place that knows; callers ask, never copy.
   * During a `response_done` listener it still names the response that is ending.
   */
  readonly activeResponseId: string | undefined;
  /** Opens the transport and waits for the provider's session; bounded by a timeout. */
  connect(): Promise<void>;
  /** Sends the configuration and waits until the provider confirms it; bounded by a timeout. */
  configure(config: SessionConfig): Promise<void>;
  /** Caller audio in the configured input format. Dropped (and counted) while disconnected. */
  sendAudio(audio: Buffer): void;
  /** Commits the buffered caller audio as a turn (only needed without turn detection). */
  commitAudio(): void;
  /** Discards caller audio not yet committed (and any utterance in progress). */
  clearAudio(): void;
  /** Cancels the active response, if any. */
  cancelResponse(): void;
  /** Cancels the active response and resolves once it is done, or after `timeoutMs`. */
  cancelAndWait(timeoutMs: number): Promise<void>;
  /** Cuts an assistant item at what the caller actually heard. */
  truncate(itemId: string, playedMs: number): void;
  /** The result of a function call; see README for when the follow-up response is created. */
  sendToolOutput(callId: string, output: unknown): void;
  /** Asks for a response; queued while another response is active. */
  createResponse(request?: ResponseRequest): void;
  /** Adds context the model should know (a DTMF digit, an operation result, a handoff note). */
  addSystemMessage(text: string): void;
  /** Tells the model the caller pressed a key; the model answers in a response. */
  sendDtmf(digit: string): void;
  /** Closes the session; resolves once the transport is closed, bounded by a timeout. */
  close(): Promise<void>;

  on<T extends RealtimeEventType>(
    type: T,
    listener: (event: RealtimeEventOf<T>) => void,
  ): () => void;
  onAny(listener: (event: RealtimeEvent) => void): () => void;
}

// ---- helpers shared by providers and the simulator -------------------------------------------

/** Bytes per millisecond of each format (8 kHz G.711: 8; 24 kHz 16-bit PCM: 48). */
export function bytesPerMs(format: AudioFormat): number {
  return format === 'pcm24k' ? 48 : 8;
}

export function audioMs(format: AudioFormat, bytes: number): number {
  return Math.floor(bytes / bytesPerMs(format));
}

/** The text the model receives for a key press; the simulator recognises exactly this form. */
export function dtmfMessage(digit: string): string {
  return `DTMF: the caller pressed ${digit}`;
}

export const DTMF_MESSAGE_PATTERN = /^DTMF: the caller pressed ([0-9A-D*#])$/;
