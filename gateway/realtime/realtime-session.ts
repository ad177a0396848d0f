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
  | { type: 'response_created'; responseId: string }
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
  | { type: 'error'; code: ErrorCode; message: string; providerCode?: string; callId?: string }
  | { type: 'disconnected'; reason: DisconnectReason; detail: string; closeCode?: number };

export type RealtimeEventType = RealtimeEvent['type'];
export type RealtimeEventOf<T extends RealtimeEventType> = Extract<RealtimeEvent, { type: T }>;

// ---- the response handle ---------------------------------------------------------------------

/** Why a response asked for was never created. */
export type RefusalReason =
  /** The session was not connected when it was asked for. */
  | 'not_connected'
  /** Too many requests were waiting already. */
  | 'busy'
  /** The provider refused the create (invalid, or while busy too often). */
  | 'refused'
  /** The provider never answered the create. */
  | 'timeout'
  /** The session closed first. */
  | 'closed';

/** How a response asked for ended: exactly one of these, once. */
export type ResponseEnd =
  | {
      readonly type: 'done';
      readonly responseId: string;
      readonly status: ResponseStatus;
      /** As on `response_done`, or `closed` when the session closed while it ran. */
      readonly reason?: string;
    }
  | { readonly type: 'refused'; readonly reason: RefusalReason };

/**
 * One response asked of the model, from the request to its end on the model's side: created
 * (with its id), each output item, then done, or refused when it was never created. Settles
 * exactly once. A listener added after the fact is called at once with what already happened.
 * Playout is the call's business (gateway/call/spoken-response.ts binds to a handle).
 */
export interface ResponseHandle {
  /** Known once the provider created the response. */
  readonly responseId: string | undefined;
  /** Output items of the response so far, in order. */
  readonly items: readonly string[];
  /** How it ended; undefined while it is asked for or running. */
  readonly end: ResponseEnd | undefined;
  /** Resolves with `end`, once. */
  readonly ended: Promise<ResponseEnd>;
  onCreated(listener: (responseId: string) => void): () => void;
  onItem(listener: (itemId: string) => void): () => void;
  onDone(listener: (end: Extract<ResponseEnd, { type: 'done' }>) => void): () => void;
  onRefused(listener: (reason: RefusalReason) => void): () => void;
}

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
  /**
   * The result of a function call; see README for when the follow-up response is created. Returns
   * the handle of the response that speaks it: the tool turn's follow-up, shared by every output
   * of the turn, or, when the turn gets none (it was cut), the next response the model starts by
   * itself (the caller's next turn).
   */
  sendToolOutput(callId: string, output: unknown): ResponseHandle;
  /** Asks for a response; queued while another response is active. */
  createResponse(request?: ResponseRequest): ResponseHandle;
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
