/**
 * Wire types of the OpenAI Realtime API (GA), the subset callgate sends and reads. Only the
 * client and server event unions live here; the client logic is in openai-realtime-session.ts and
 * the local simulator speaks the same types from the server side.
 *
 * GA names, not the beta ones: `session.type: "realtime"`, `audio.input/output.format` objects,
 * `response.output_audio.delta`, `response.output_audio_transcript.delta`,
 * `conversation.item.added` / `conversation.item.done`.
 */

export type AudioFormatWire =
  { type: 'audio/pcm'; rate: 24000 } | { type: 'audio/pcmu' } | { type: 'audio/pcma' };

export type TurnDetectionWire =
  | {
      type: 'server_vad';
      threshold?: number;
      prefix_padding_ms?: number;
      silence_duration_ms?: number;
      create_response?: boolean;
      interrupt_response?: boolean;
      idle_timeout_ms?: number | null;
    }
  | {
      type: 'semantic_vad';
      eagerness?: 'low' | 'medium' | 'high' | 'auto';
      create_response?: boolean;
      interrupt_response?: boolean;
    };

export interface FunctionToolWire {
  type: 'function';
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

export type ToolChoiceWire = 'auto' | 'none' | 'required' | { type: 'function'; name: string };

export interface SessionWire {
  type: 'realtime';
  id?: string;
  object?: 'realtime.session';
  model?: string;
  output_modalities?: ('audio' | 'text')[];
  instructions?: string;
  audio?: {
    input?: {
      format?: AudioFormatWire;
      transcription?: { model: string; language?: string; prompt?: string } | null;
      noise_reduction?: { type: 'near_field' | 'far_field' } | null;
      turn_detection?: TurnDetectionWire | null;
    };
    output?: { format?: AudioFormatWire; voice?: string; speed?: number };
  };
  tools?: FunctionToolWire[];
  tool_choice?: ToolChoiceWire;
  max_output_tokens?: number | 'inf';
}

export type ContentPartWire =
  | { type: 'input_text'; text: string }
  | { type: 'input_audio'; audio?: string; transcript?: string | null }
  | { type: 'output_text'; text: string }
  | { type: 'output_audio'; audio?: string; transcript?: string | null };

export type ItemStatusWire = 'completed' | 'incomplete' | 'in_progress';

export type ItemWire =
  | {
      type: 'message';
      id?: string;
      object?: 'realtime.item';
      status?: ItemStatusWire;
      role: 'system' | 'user' | 'assistant';
      content: ContentPartWire[];
    }
  | {
      type: 'function_call';
      id?: string;
      object?: 'realtime.item';
      status?: ItemStatusWire;
      call_id: string;
      name: string;
      arguments: string;
    }
  | {
      type: 'function_call_output';
      id?: string;
      object?: 'realtime.item';
      status?: ItemStatusWire;
      call_id: string;
      output: string;
    };

export type ResponseStatusWire =
  'in_progress' | 'completed' | 'cancelled' | 'failed' | 'incomplete';

export interface ResponseWire {
  id: string;
  object: 'realtime.response';
  status: ResponseStatusWire;
  status_details: {
    type?: ResponseStatusWire;
    reason?: 'turn_detected' | 'client_cancelled' | 'max_output_tokens' | 'content_filter';
    error?: { type: string; code?: string } | null;
  } | null;
  output: ItemWire[];
  conversation_id?: string;
  output_modalities?: ('audio' | 'text')[];
  metadata?: Record<string, string> | null;
  usage?: unknown;
}

export interface ResponseCreateParamsWire {
  instructions?: string;
  output_modalities?: ('audio' | 'text')[];
  tool_choice?: ToolChoiceWire;
  tools?: FunctionToolWire[];
  conversation?: 'auto' | 'none';
  metadata?: Record<string, string>;
}

export interface ErrorDetailWire {
  type: string;
  code: string | null;
  message: string;
  param: string | null;
  event_id: string | null;
}

// ---- client -> server --------------------------------------------------------------------------

export type ClientEvent =
  | { type: 'session.update'; event_id?: string; session: SessionWire }
  | { type: 'input_audio_buffer.append'; event_id?: string; audio: string }
  | { type: 'input_audio_buffer.commit'; event_id?: string }
  | { type: 'input_audio_buffer.clear'; event_id?: string }
  | {
      type: 'conversation.item.create';
      event_id?: string;
      previous_item_id?: string | null;
      item: ItemWire;
    }
  | {
      type: 'conversation.item.truncate';
      event_id?: string;
      item_id: string;
      content_index: number;
      audio_end_ms: number;
    }
  | { type: 'conversation.item.delete'; event_id?: string; item_id: string }
  | { type: 'response.create'; event_id?: string; response?: ResponseCreateParamsWire }
  | { type: 'response.cancel'; event_id?: string; response_id?: string };

// ---- server -> client --------------------------------------------------------------------------

interface ServerBase {
  event_id: string;
}

interface ResponseContentRef {
  response_id: string;
  item_id: string;
  output_index: number;
  content_index: number;
}

export type ServerEvent =
  | (ServerBase & { type: 'error'; error: ErrorDetailWire })
  | (ServerBase & { type: 'session.created'; session: SessionWire })
  | (ServerBase & { type: 'session.updated'; session: SessionWire })
  | (ServerBase & {
      type: 'input_audio_buffer.speech_started';
      audio_start_ms: number;
      item_id: string;
    })
  | (ServerBase & {
      type: 'input_audio_buffer.speech_stopped';
      audio_end_ms: number;
      item_id: string;
    })
  | (ServerBase & {
      type: 'input_audio_buffer.committed';
      previous_item_id: string | null;
      item_id: string;
    })
  | (ServerBase & { type: 'input_audio_buffer.cleared' })
  | (ServerBase & {
      type: 'input_audio_buffer.timeout_triggered';
      audio_start_ms: number;
      audio_end_ms: number;
      item_id: string;
    })
  | (ServerBase & {
      type: 'conversation.item.added';
      previous_item_id: string | null;
      item: ItemWire;
    })
  | (ServerBase & {
      type: 'conversation.item.done';
      previous_item_id: string | null;
      item: ItemWire;
    })
  | (ServerBase & {
      type: 'conversation.item.truncated';
      item_id: string;
      content_index: number;
      audio_end_ms: number;
    })
  | (ServerBase & { type: 'conversation.item.deleted'; item_id: string })
  | (ServerBase & {
      type: 'conversation.item.input_audio_transcription.delta';
      item_id: string;
      content_index: number;
      delta: string;
    })
  | (ServerBase & {
      type: 'conversation.item.input_audio_transcription.completed';
      item_id: string;
      content_index: number;
      transcript: string;
    })
  | (ServerBase & {
      type: 'conversation.item.input_audio_transcription.failed';
      item_id: string;
      content_index: number;
      error: { type: string; code: string | null; message: string };
    })
  | (ServerBase & { type: 'response.created'; response: ResponseWire })
  | (ServerBase & { type: 'response.done'; response: ResponseWire })
  | (ServerBase & {
      type: 'response.output_item.added';
      response_id: string;
      output_index: number;
      item: ItemWire;
    })
  | (ServerBase & {
      type: 'response.output_item.done';
      response_id: string;
      output_index: number;
      item: ItemWire;
    })
  | (ServerBase &
      ResponseContentRef & { type: 'response.content_part.added'; part: ContentPartWire })
  | (ServerBase &
      ResponseContentRef & { type: 'response.content_part.done'; part: ContentPartWire })
  | (ServerBase & ResponseContentRef & { type: 'response.output_audio.delta'; delta: string })
  | (ServerBase & ResponseContentRef & { type: 'response.output_audio.done' })
  | (ServerBase &
      ResponseContentRef & { type: 'response.output_audio_transcript.delta'; delta: string })
  | (ServerBase &
      ResponseContentRef & { type: 'response.output_audio_transcript.done'; transcript: string })
  | (ServerBase & ResponseContentRef & { type: 'response.output_text.delta'; delta: string })
  | (ServerBase & ResponseContentRef & { type: 'response.output_text.done'; text: string })
  | (ServerBase & {
      type: 'response.function_call_arguments.delta';
      response_id: string;
      item_id: string;
      output_index: number;
      call_id: string;
      delta: string;
    })
  | (ServerBase & {
      type: 'response.function_call_arguments.done';
      response_id: string;
      item_id: string;
      output_index: number;
      call_id: string;
      name: string;
      arguments: string;
    })
  | (ServerBase & {
      type: 'rate_limits.updated';
      rate_limits: { name: string; limit: number; remaining: number; reset_seconds: number }[];
    });

export type ServerEventType = ServerEvent['type'];

/** Every server event type above, for telling an unknown event from a known one we do not act on. */
export const SERVER_EVENT_TYPES: ReadonlySet<string> = new Set<ServerEventType>([
  'error',
  'session.created',
  'session.updated',
  'input_audio_buffer.speech_started',
  'input_audio_buffer.speech_stopped',
  'input_audio_buffer.committed',
  'input_audio_buffer.cleared',
  'input_audio_buffer.timeout_triggered',
  'conversation.item.added',
  'conversation.item.done',
  'conversation.item.truncated',
  'conversation.item.deleted',
  'conversation.item.input_audio_transcription.delta',
  'conversation.item.input_audio_transcription.completed',
  'conversation.item.input_audio_transcription.failed',
  'response.created',
  'response.done',
  'response.output_item.added',
  'response.output_item.done',
  'response.content_part.added',
  'response.content_part.done',
  'response.output_audio.delta',
  'response.output_audio.done',
  'response.output_audio_transcript.delta',
  'response.output_audio_transcript.done',
  'response.output_text.delta',
  'response.output_text.done',
  'response.function_call_arguments.delta',
  'response.function_call_arguments.done',
  'rate_limits.updated',
]);

/** Error codes of the protocol that callgate steers by. */
export const WIRE_ERROR = {
  activeResponse: 'conversation_already_has_active_response',
  cancelNotActive: 'response_cancel_not_active',
  truncateUnknownItem: 'item_truncate_invalid_item_id',
  commitEmpty: 'input_audio_buffer_commit_empty',
  sessionExpired: 'session_expired',
  invalidValue: 'invalid_value',
  belowMin: 'integer_below_min_value',
  unsupportedContent: 'unsupported_content_type',
  unknownParameter: 'unknown_parameter',
  missingParameter: 'missing_required_parameter',
  invalidJson: 'invalid_json',
  invalidEvent: 'invalid_event',
} as const;
