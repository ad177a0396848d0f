import { describe, expect, it } from 'vitest';
import { serverEventProblem } from '../../../gateway/realtime/openai-server-event-check.ts';

type Event = Record<string, unknown> & { type: string };

const SESSION = {
  type: 'realtime',
  id: 'sess_1',
  instructions: 'Be brief.',
  audio: {
    input: {
      format: { type: 'audio/pcmu' },
      turn_detection: { type: 'server_vad', interrupt_response: true },
    },
    output: { format: { type: 'audio/pcmu' } },
  },
};
const RESPONSE = {
  id: 'resp_1',
  object: 'realtime.response',
  status: 'in_progress',
  status_details: null,
  output: [],
  metadata: { callgate_create: 'c1' },
};
const DONE = {
  ...RESPONSE,
  status: 'completed',
  status_details: { type: 'completed', reason: 'turn_detected', error: null },
  output: [
    { type: 'function_call', id: 'item_2', call_id: 'call_1', name: 'book', arguments: '{}' },
    { type: 'message', role: 'assistant', content: [] },
  ],
};
const REF = { response_id: 'resp_1', item_id: 'item_1', output_index: 0, content_index: 0 };

/** One valid event of each type the client reads, as the provider sends it. */
const VALID: Event[] = [
  {
    type: 'error',
    event_id: 'e',
    error: {
      type: 'invalid_request_error',
      code: 'invalid_value',
      message: 'no',
      param: null,
      event_id: 'evt_cg_1',
    },
  },
  {
    type: 'error',
    event_id: 'e',
    error: { type: 'server_error', code: null, message: 'oops', param: null, event_id: null },
  },
  { type: 'session.created', event_id: 'e', session: SESSION },
  {
    type: 'session.updated',
    event_id: 'e',
    session: { type: 'realtime', audio: { input: { turn_detection: null } } },
  },
  {
    type: 'input_audio_buffer.speech_started',
    event_id: 'e',
    audio_start_ms: 120,
    item_id: 'item_u',
  },
  {
    type: 'input_audio_buffer.speech_stopped',
    event_id: 'e',
    audio_end_ms: 900,
    item_id: 'item_u',
  },
  { type: 'response.created', event_id: 'e', response: RESPONSE },
  { type: 'response.created', event_id: 'e', response: { ...RESPONSE, metadata: null } },
  { type: 'response.done', event_id: 'e', response: DONE },
  {
    type: 'response.done',
    event_id: 'e',
    response: {
      ...DONE,
      status: 'failed',
      status_details: { type: 'failed', error: { type: 'server_error', code: 'overloaded' } },
    },
  },
  { type: 'response.output_audio.delta', event_id: 'e', ...REF, delta: 'AAAA' },
  { type: 'response.output_audio_transcript.delta', event_id: 'e', ...REF, delta: 'Hel' },
  { type: 'response.output_audio_transcript.done', event_id: 'e', ...REF, transcript: 'Hello' },
  {
    type: 'conversation.item.input_audio_transcription.delta',
    event_id: 'e',
    item_id: 'item_u',
    content_index: 0,
    delta: 'I',
  },
  {
    type: 'conversation.item.input_audio_transcription.completed',
    event_id: 'e',
    item_id: 'item_u',
    content_index: 0,
    transcript: 'I would like a table',
  },
  {
    type: 'response.function_call_arguments.done',
    event_id: 'e',
    response_id: 'resp_1',
    item_id: 'item_2',
    output_index: 1,
    call_id: 'call_1',
    name: 'book',
    arguments: '{}',
  },
  {
    type: 'conversation.item.truncated',
    event_id: 'e',
    item_id: 'item_1',
    content_index: 0,
    audio_end_ms: 640,
  },
];

/** Fields the client reads, by event type, with a value of each wrong kind it must refuse. */
const READ_FIELDS: [type: string, path: string[]][] = [
  ['error', ['error']],
  ['error', ['error', 'type']],
  ['error', ['error', 'message']],
  ['session.created', ['session']],
  ['input_audio_buffer.speech_started', ['item_id']],
  ['input_audio_buffer.speech_started', ['audio_start_ms']],
  ['input_audio_buffer.speech_stopped', ['item_id']],
  ['input_audio_buffer.speech_stopped', ['audio_end_ms']],
  ['response.created', ['response']],
  ['response.created', ['response', 'id']],
  ['response.done', ['response']],
  ['response.done', ['response', 'id']],
  ['response.done', ['response', 'status']],
  ['response.output_audio.delta', ['response_id']],
  ['response.output_audio.delta', ['item_id']],
  ['response.output_audio.delta', ['delta']],
  ['response.output_audio_transcript.delta', ['item_id']],
  ['response.output_audio_transcript.done', ['transcript']],
  ['conversation.item.input_audio_transcription.completed', ['item_id']],
  ['response.function_call_arguments.done', ['response_id']],
  ['response.function_call_arguments.done', ['item_id']],
  ['response.function_call_arguments.done', ['call_id']],
  ['response.function_call_arguments.done', ['name']],
  ['response.function_call_arguments.done', ['arguments']],
  ['conversation.item.truncated', ['item_id']],
  ['conversation.item.truncated', ['audio_end_ms']],
];

const WRONG_VALUES: unknown[] = [
  undefined,
  null,
  42,
  -1,
  true,
  [],
  ['resp_1'],
  { id: 'resp_1' },
  'x',
];

function validOf(type: string): Event {
  const event = VALID.find((e) => e.type === type);
  if (event === undefined) throw new Error(`no valid ${type}`);
  return structuredClone(event);
}

/** A copy of `event` with the value at `path` replaced (undefined: removed). */
function withValue(event: Event, path: readonly string[], value: unknown): Event {
  const copy = structuredClone(event);
  let holder = copy as Record<string, unknown>;
  for (const key of path.slice(0, -1)) holder = holder[key] as Record<string, unknown>;
  const last = path[path.length - 1] ?? '';
  if (value === undefined) delete holder[last];
  else holder[last] = value;
  return copy;
}

/** Whether `value` is of the kind the field at `path` must hold (so replacing it is no fault). */
function fits(original: unknown, value: unknown, path: readonly string[]): boolean {
  // Only the five response statuses fit, and no wrong value is one.
  if (path[path.length - 1] === 'status') return false;
  if (typeof original === 'string') return typeof value === 'string';
  if (typeof original === 'number') return typeof value === 'number' && value >= 0;
  // An object in place of an object is checked field by field in the tables below.
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

describe('serverEventProblem', () => {
  it.each(VALID.map((event) => [event.type, event] as const))(
    'should accept a valid %s',
    (_type, event) => {
      expect(serverEventProblem(event)).toBeUndefined();
    },
  );

  it('should not look at events the client does not read', () => {
    expect(
      serverEventProblem({ type: 'rate_limits.updated', rate_limits: 'none' }),
    ).toBeUndefined();
    expect(
      serverEventProblem({ type: 'response.output_item.added', response_id: 7 }),
    ).toBeUndefined();
  });

  for (const [type, path] of READ_FIELDS) {
    for (const value of WRONG_VALUES) {
      const event = validOf(type);
      let original: unknown = event;
      for (const key of path) original = (original as Record<string, unknown>)[key];
      if (fits(original, value, path)) continue;
      it(`should refuse ${type} with ${path.join('.')} = ${JSON.stringify(value) ?? 'missing'}`, () => {
        const problem = serverEventProblem(withValue(event, path, value));
        expect(problem).toBeDefined();
        expect(problem).toContain(path.join('.'));
      });
    }
  }

  it.each([
    [
      'a function call output item without a call id',
      { ...DONE, output: [{ type: 'function_call', name: 'book', arguments: '{}' }] },
      'response.output[0].call_id missing',
    ],
    ['output that is not an array', { ...DONE, output: { 0: 'x' } }, 'response.output an object'],
    [
      'an output item that is not an object',
      { ...DONE, output: ['item'] },
      'response.output[0] a string',
    ],
    [
      'status_details that are a string',
      { ...DONE, status_details: 'cancelled' },
      'response.status_details a string',
    ],
    [
      'a reason that is a number',
      { ...DONE, status_details: { reason: 3 } },
      'response.status_details.reason a number',
    ],
    [
      'an error code that is an object',
      { ...DONE, status_details: { error: { code: {} } } },
      'response.status_details.error.code an object',
    ],
  ])('should refuse a response.done with %s', (_name, response, problem) => {
    expect(serverEventProblem({ type: 'response.done', response })).toContain(problem);
  });

  it.each([
    ['metadata that is a string', { ...RESPONSE, metadata: 'c1' }, 'response.metadata a string'],
    [
      'a metadata value that is a number',
      { ...RESPONSE, metadata: { callgate_create: 1 } },
      'response.metadata.callgate_create a number',
    ],
  ])('should refuse a response.created with %s', (_name, response, problem) => {
    expect(serverEventProblem({ type: 'response.created', response })).toContain(problem);
  });

  it.each([
    ['an id that is a number', { ...SESSION, id: 1 }, 'session.id a number'],
    ['audio that is a string', { ...SESSION, audio: 'pcmu' }, 'session.audio a string'],
    [
      'a format that is null',
      { ...SESSION, audio: { input: { format: null } } },
      'session.audio.input.format null',
    ],
    [
      'a format without a type',
      { ...SESSION, audio: { output: { format: {} } } },
      'session.audio.output.format.type missing',
    ],
    [
      'interrupt_response that is a string',
      { ...SESSION, audio: { input: { turn_detection: { interrupt_response: 'yes' } } } },
      'interrupt_response a string',
    ],
    [
      'instructions that are a number',
      { ...SESSION, instructions: 7 },
      'session.instructions a number',
    ],
  ])('should refuse a session.created with %s', (_name, session, problem) => {
    expect(serverEventProblem({ type: 'session.created', session })).toContain(problem);
  });

  it('should hold an error event to what the client reads of it', () => {
    expect(
      serverEventProblem({ type: 'error', error: { type: 'x', message: 'm', code: 5 } }),
    ).toContain('error.code a number');
    expect(
      serverEventProblem({ type: 'error', error: { type: 'x', message: 'm', event_id: 5 } }),
    ).toContain('error.event_id a number');
    expect(
      serverEventProblem({ type: 'error', error: { type: 'x', message: 'm' } }),
    ).toBeUndefined();
  });

  it('should refuse milliseconds that are not a finite number at or above zero', () => {
    for (const ms of [-1, Number.NaN, '10', null]) {
      expect(
        serverEventProblem({
          type: 'input_audio_buffer.speech_started',
          item_id: 'i',
          audio_start_ms: ms,
        }),
      ).toContain('audio_start_ms');
    }
  });

  it('should never accept a generated mutation whose read fields have the wrong type', () => {
    const next = random(7);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    for (let i = 0; i < 5_000; i++) {
      const [type, path] = pick(READ_FIELDS);
      // Mutate somewhere along the path, or a sibling at the same depth.
      const depth = 1 + Math.floor(next() * path.length);
      const mutated = withValue(
        validOf(type),
        path.slice(0, depth),
        pick([...WRONG_VALUES, '', 0, 1e308, {}]),
      );
      if (serverEventProblem(mutated) !== undefined) continue;
      let value: unknown = mutated;
      for (const key of path)
        value =
          typeof value === 'object' && value !== null
            ? (value as Record<string, unknown>)[key]
            : undefined;
      let original: unknown = validOf(type);
      for (const key of path) original = (original as Record<string, unknown>)[key];
      expect(typeof value, `${type} ${path.join('.')} accepted as ${JSON.stringify(value)}`).toBe(
        typeof original,
      );
    }
  });
});

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
