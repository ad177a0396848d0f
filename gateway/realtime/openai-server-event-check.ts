/**
 * Checks, at the edge, the fields of a server event that the OpenAI client acts on: the ids it
 * keys state and timers by (response, item and call ids), the numbers it passes on, and the
 * shapes it reads into. An event that fails is a protocol error and is never used; a TypeScript
 * type says nothing about what a peer actually sent.
 *
 * Pure. Only what the client reads is checked, so an event the client ignores is never refused
 * for a field it does not look at, and an audio delta is held to exactly what the byte reader
 * (openai-audio-delta-reader.ts) holds it to: string ids and a string delta.
 */
import type { ServerEventType } from './openai-protocol.ts';

type Fields = Readonly<Record<string, unknown>>;
/** Returns what is wrong with the event, or undefined when the fields it checks are usable. */
type FieldCheck = (event: Fields) => string | undefined;

const RESPONSE_STATUSES: ReadonlySet<unknown> = new Set([
  'in_progress',
  'completed',
  'cancelled',
  'failed',
  'incomplete',
]);

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function string(key: string): FieldCheck {
  return (event) =>
    typeof event[key] === 'string' ? undefined : `${key} ${describe(event[key])}, not a string`;
}

function optionalString(key: string, nullable: boolean): FieldCheck {
  return (event) => {
    const value = event[key];
    if (value === undefined || typeof value === 'string' || (nullable && value === null))
      return undefined;
    return `${key} ${describe(value)}, not a string`;
  };
}

function milliseconds(key: string): FieldCheck {
  return (event) => {
    const value = event[key];
    return typeof value === 'number' && Number.isFinite(value) && value >= 0
      ? undefined
      : `${key} ${describe(value)}, not a number of milliseconds`;
  };
}

/** The first problem of `value` under `key` (an object whose own fields `checks` test). */
function nested(
  key: string,
  checks: readonly FieldCheck[],
  presence: 'required' | 'optional' | 'nullable',
): FieldCheck {
  return (event) => {
    const value = event[key];
    if (value === undefined && presence !== 'required') return undefined;
    if (value === null && presence === 'nullable') return undefined;
    if (!isObject(value)) return `${key} ${describe(value)}, not an object`;
    const problem = firstProblem(value, checks);
    return problem === undefined ? undefined : `${key}.${problem}`;
  };
}

function firstProblem(event: Fields, checks: readonly FieldCheck[]): string | undefined {
  for (const check of checks) {
    const problem = check(event);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function optionalBoolean(key: string): FieldCheck {
  return (event) =>
    event[key] === undefined || typeof event[key] === 'boolean'
      ? undefined
      : `${key} ${describe(event[key])}, not a boolean`;
}

const format = nested('format', [string('type')], 'optional');
const turnDetection = nested('turn_detection', [optionalBoolean('interrupt_response')], 'nullable');
const audio = nested(
  'audio',
  [nested('input', [format, turnDetection], 'optional'), nested('output', [format], 'optional')],
  'optional',
);
const session = nested(
  'session',
  [optionalString('id', false), optionalString('instructions', false), audio],
  'required',
);

const metadata: FieldCheck = (response) => {
  const value = response.metadata;
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) return `metadata ${describe(value)}, not an object`;
  for (const [key, entry] of Object.entries(value)) {
    if (typeof entry !== 'string')
      return `metadata.${key.slice(0, 64)} ${describe(entry)}, not a string`;
  }
  return undefined;
};

const status: FieldCheck = (response) =>
  RESPONSE_STATUSES.has(response.status)
    ? undefined
    : `status ${describe(response.status)}, not a response status`;

const output: FieldCheck = (response) => {
  const value = response.output;
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) return `output ${describe(value)}, not an array`;
  for (const [index, item] of (value as unknown[]).entries()) {
    if (!isObject(item)) return `output[${index}] ${describe(item)}, not an object`;
    if (item.type === 'function_call' && typeof item.call_id !== 'string')
      return `output[${index}].call_id ${describe(item.call_id)}, not a string`;
  }
  return undefined;
};

const statusDetails = nested(
  'status_details',
  [optionalString('reason', false), nested('error', [optionalString('code', true)], 'nullable')],
  'nullable',
);

const CHECKS: Partial<Record<ServerEventType, readonly FieldCheck[]>> = {
  error: [
    nested(
      'error',
      [
        string('type'),
        optionalString('code', true),
        string('message'),
        optionalString('event_id', true),
      ],
      'required',
    ),
  ],
  'session.created': [session],
  'session.updated': [session],
  'input_audio_buffer.speech_started': [string('item_id'), milliseconds('audio_start_ms')],
  'input_audio_buffer.speech_stopped': [string('item_id'), milliseconds('audio_end_ms')],
  'response.created': [nested('response', [string('id'), metadata], 'required')],
  'response.done': [nested('response', [string('id'), status, statusDetails, output], 'required')],
  'response.output_audio.delta': [string('response_id'), string('item_id'), string('delta')],
  'response.output_audio_transcript.delta': [
    string('response_id'),
    string('item_id'),
    string('delta'),
  ],
  'response.output_audio_transcript.done': [
    string('response_id'),
    string('item_id'),
    string('transcript'),
  ],
  'conversation.item.input_audio_transcription.delta': [string('item_id'), string('delta')],
  'conversation.item.input_audio_transcription.completed': [
    string('item_id'),
    string('transcript'),
  ],
  'response.function_call_arguments.done': [
    string('response_id'),
    string('item_id'),
    string('call_id'),
    string('name'),
    string('arguments'),
  ],
  'conversation.item.truncated': [string('item_id'), milliseconds('audio_end_ms')],
};

/**
 * What makes a server event unusable, e.g. `response.id missing, not a string`, or undefined when
 * every field the client reads of it is there with the right type. `event.type` is a known type.
 */
export function serverEventProblem(event: Fields & { type: string }): string | undefined {
  const checks = CHECKS[event.type as ServerEventType];
  return checks === undefined ? undefined : firstProblem(event, checks);
}
