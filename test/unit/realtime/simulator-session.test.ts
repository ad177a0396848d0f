import { describe, expect, it } from 'vitest';
import type { ServerEvent } from '../../../gateway/realtime/openai-protocol.ts';
import { SimulatorSession } from '../../../gateway/realtime/simulator/simulator-session.ts';
import { parseSimulatorScript } from '../../../gateway/realtime/simulator/simulator-script.ts';

const script = parseSimulatorScript(`
greeting: Hello there
fallback: Anything else?
digits:
  "9": { say: Checking both, tools: [{ name: lookup, arguments: { n: 1 } }, { name: lookup, arguments: { n: 2 } }] }
toolOutputs:
  lookup: Found {output.count|nothing}.
`);

/** A stub synthesizer: one second of audio for every line, so tests need no espeak-ng. */
const oneSecond = { render: () => Promise.resolve(Buffer.alloc(8000, 0x55)) };

function simulator(options: { speechSpeed?: number } = {}) {
  const sent: ServerEvent[] = [];
  const closed: [number, string][] = [];
  const session = new SimulatorSession({
    script,
    synthesizer: oneSecond,
    model: 'gpt-realtime',
    deterministic: true,
    speechSpeed: options.speechSpeed ?? 0,
    functionCallGapMs: 0,
    transport: {
      send: (text) => sent.push(JSON.parse(text) as ServerEvent),
      close: (code, reason) => closed.push([code, reason]),
    },
  });
  const send = (event: Record<string, unknown>): void => session.receive(JSON.stringify(event));
  const errors = () => sent.flatMap((event) => (event.type === 'error' ? [event.error] : []));
  const doneCount = () => sent.filter((event) => event.type === 'response.done').length;
  /** Waits until `count` responses are done (polling: the simulated response runs asynchronously). */
  const settle = async (count = 1): Promise<void> => {
    const deadline = Date.now() + 5_000;
    while (doneCount() < count) {
      if (Date.now() > deadline)
        throw new Error(`only ${doneCount()} of ${count} responses finished`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  send({
    type: 'session.update',
    session: {
      type: 'realtime',
      audio: {
        input: { format: { type: 'audio/pcmu' } },
        output: { format: { type: 'audio/pcmu' } },
      },
    },
  });
  return { session, sent, closed, send, errors, settle };
}

describe('when a client event is malformed', () => {
  it.each([
    ['not JSON', 'nope{', 'invalid_json', null],
    ['an unknown type', '{"type":"response.explode","event_id":"c1"}', 'invalid_value', 'type'],
    ['no type', '{"event_id":"c1"}', 'missing_required_parameter', 'type'],
    [
      'an append without audio',
      '{"type":"input_audio_buffer.append","event_id":"c1"}',
      'missing_required_parameter',
      'audio',
    ],
    [
      'a session.update of another session type',
      '{"type":"session.update","event_id":"c1","session":{"type":"transcription"}}',
      'invalid_value',
      'session.type',
    ],
    [
      'an unsupported audio format',
      '{"type":"session.update","event_id":"c1","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":16000}}}}}',
      'invalid_value',
      'session.audio.input.format',
    ],
    [
      'an item without content',
      '{"type":"conversation.item.create","event_id":"c1","item":{"type":"message","role":"user"}}',
      'missing_required_parameter',
      'item.content',
    ],
    [
      'an output for an unknown call',
      '{"type":"conversation.item.create","event_id":"c1","item":{"type":"function_call_output","call_id":"nope","output":"{}"}}',
      'invalid_value',
      'item.call_id',
    ],
  ])('should answer %s with an error event', (_name, frame, code, param) => {
    const sim = simulator();
    sim.session.receive(frame);
    expect(sim.errors()).toEqual([
      expect.objectContaining({ type: 'invalid_request_error', code, param }),
    ]);
    // The error names the client event that caused it, when the client gave it an id.
    if (frame.includes('"c1"')) expect(sim.errors()[0]?.event_id).toBe('c1');
  });
});

describe('when a response is asked for while one is active', () => {
  it('should refuse it with conversation_already_has_active_response and keep the first', async () => {
    const sim = simulator({ speechSpeed: 1 });
    sim.send({ type: 'response.create', event_id: 'c1' });
    sim.send({ type: 'response.create', event_id: 'c2' });
    expect(sim.errors()).toEqual([
      expect.objectContaining({ code: 'conversation_already_has_active_response', event_id: 'c2' }),
    ]);
    expect(sim.errors()[0]?.message).toMatch(
      /^Conversation already has an active response in progress: resp_0001\./,
    );
    sim.send({ type: 'response.cancel' });
    await sim.settle();
    const done = sim.sent.find((event) => event.type === 'response.done');
    expect(done?.type === 'response.done' && done.response.status_details).toEqual({
      type: 'cancelled',
      reason: 'client_cancelled',
    });
  });
});

describe('when a response is created with metadata', () => {
  it('should echo the metadata in response.created and response.done, and leave a server-started response without any', async () => {
    const sim = simulator();
    sim.send({
      type: 'response.create',
      response: { metadata: { callgate_create: 'c7', ignored: 42 } },
    });
    await sim.settle();
    const created = sim.sent.find((event) => event.type === 'response.created');
    const done = sim.sent.find((event) => event.type === 'response.done');
    expect(created?.type === 'response.created' && created.response.metadata).toEqual({
      callgate_create: 'c7',
    });
    expect(done?.type === 'response.done' && done.response.metadata).toEqual({
      callgate_create: 'c7',
    });
    sim.send({ type: 'response.create' });
    await sim.settle(2);
    const second = sim.sent.filter((event) => event.type === 'response.created')[1];
    expect(second?.type === 'response.created' && second.response.metadata).toBeNull();
  });
});

describe('when a cancel arrives with no active response', () => {
  it('should answer response_cancel_not_active', () => {
    const sim = simulator();
    sim.send({ type: 'response.cancel', event_id: 'c1' });
    expect(sim.errors()).toEqual([
      expect.objectContaining({
        code: 'response_cancel_not_active',
        message: 'Cancellation failed: no active response found',
      }),
    ]);
  });
});

describe('when an assistant item is truncated', () => {
  async function spokenItem() {
    const sim = simulator();
    sim.send({ type: 'response.create' });
    await sim.settle();
    const itemId = sim.session.said[0]?.itemId ?? '';
    return { sim, itemId };
  }

  it.each([
    [
      -1,
      'integer_below_min_value',
      "Invalid 'audio_end_ms': integer below minimum value. Expected a value >= 0, but got -1 instead.",
    ],
    [1001, 'invalid_value', 'Audio content of 1000ms is already shorter than 1001ms'],
  ])('should refuse offset %i with %s', async (offset, code, message) => {
    const { sim, itemId } = await spokenItem();
    sim.send({
      type: 'conversation.item.truncate',
      item_id: itemId,
      content_index: 0,
      audio_end_ms: offset,
    });
    expect(sim.errors()).toEqual([
      expect.objectContaining({ code, message, param: 'audio_end_ms' }),
    ]);
    expect(sim.session.said[0]?.truncatedAtMs).toBeUndefined();
  });

  it('should accept an offset within the audio, record it, and refuse a later one beyond it', async () => {
    const { sim, itemId } = await spokenItem();
    sim.send({
      type: 'conversation.item.truncate',
      item_id: itemId,
      content_index: 0,
      audio_end_ms: 400,
    });
    expect(sim.sent.at(-1)).toMatchObject({
      type: 'conversation.item.truncated',
      item_id: itemId,
      audio_end_ms: 400,
    });
    expect(sim.session.said[0]?.truncatedAtMs).toBe(400);
    sim.send({
      type: 'conversation.item.truncate',
      item_id: itemId,
      content_index: 0,
      audio_end_ms: 500,
    });
    expect(sim.errors()[0]?.message).toBe('Audio content of 400ms is already shorter than 500ms');
  });
});

describe('when a digit step calls two tools', () => {
  it('should emit both calls in one response and speak a line per output in the next', async () => {
    const sim = simulator();
    sim.session.pressDigit('9');
    await sim.settle();
    const calls = sim.session.toolCalls;
    expect(calls.map((c) => c.arguments)).toEqual(['{"n":1}', '{"n":2}']);
    const done = sim.sent.filter((event) => event.type === 'response.done');
    expect(done).toHaveLength(1);
    const output =
      done[0]?.type === 'response.done' ? done[0].response.output.map((item) => item.type) : [];
    expect(output).toEqual(['message', 'function_call', 'function_call']);
    for (const [i, call] of calls.entries()) {
      sim.send({
        type: 'conversation.item.create',
        item: {
          type: 'function_call_output',
          call_id: call.callId,
          output: JSON.stringify({ count: i + 3 }),
        },
      });
    }
    sim.send({ type: 'response.create' });
    await sim.settle(2);
    expect(sim.session.said.map((s) => s.text)).toEqual(['Checking both', 'Found 3. Found 4.']);
  });
});

describe('when turn detection is off and the client commits audio itself', () => {
  it.each([
    [99, 'input_audio_buffer_commit_empty'],
    [100, undefined],
    [250, undefined],
  ])('should measure %i ms of appended audio and commit it only from 100 ms on', (ms, code) => {
    const sim = simulator();
    sim.send({
      type: 'session.update',
      session: { type: 'realtime', audio: { input: { turn_detection: null } } },
    });
    // Odd-sized appends exercise the length computed from base64 without decoding.
    const audio = Buffer.alloc(ms * 8, 0xff);
    for (let offset = 0; offset < audio.length; offset += 157)
      sim.send({
        type: 'input_audio_buffer.append',
        audio: audio.subarray(offset, offset + 157).toString('base64'),
      });
    sim.send({ type: 'input_audio_buffer.commit' });
    if (code === undefined) {
      expect(sim.errors()).toEqual([]);
      expect(sim.session.heard).toEqual([
        {
          kind: 'committed',
          itemId: expect.any(String) as string,
          audioMs: ms,
          atMs: expect.any(Number) as number,
        },
      ]);
    } else {
      expect(sim.errors()).toEqual([expect.objectContaining({ code })]);
      expect(sim.errors()[0]?.message).toContain(`buffer only has ${ms.toFixed(2)}ms of audio`);
    }
  });
});

describe('when the session runs into the duration limit', () => {
  it('should send session_expired and close with 1001', () => {
    const sim = simulator();
    sim.session.expire();
    expect(sim.errors()).toEqual([
      expect.objectContaining({
        code: 'session_expired',
        message: 'Your session hit the maximum duration of 60 minutes.',
      }),
    ]);
    expect(sim.closed).toEqual([[1001, 'Your session hit the maximum duration of 60 minutes.']]);
  });
});

describe('when speech is paced', () => {
  it('should take the line length divided by the speed, never less', async () => {
    const sim = simulator({ speechSpeed: 4 });
    const started = performance.now();
    sim.send({ type: 'response.create' });
    await sim.settle();
    // One second of audio at four times real time: about 250 ms.
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(sim.session.said[0]?.audioMsSent).toBe(1000);
  });
});

describe('when ids are generated in deterministic mode', () => {
  it('should number them in sequence', async () => {
    const sim = simulator();
    sim.send({ type: 'response.create' });
    await sim.settle();
    expect(sim.session.sessionId).toBe('sess_0001');
    expect(sim.session.said[0]).toMatchObject({
      responseId: 'resp_0001',
      itemId: 'item_0001',
      text: 'Hello there',
      totalAudioMs: 1000,
      audioMsSent: 1000,
      status: 'completed',
    });
  });
});

describe('when a client sends broken versions of every client event', () => {
  const valid: Record<string, unknown>[] = [
    {
      type: 'session.update',
      session: {
        type: 'realtime',
        instructions: 'x',
        audio: {
          input: { format: { type: 'audio/pcmu' }, turn_detection: { type: 'server_vad' } },
          output: { format: { type: 'audio/pcmu' }, voice: 'marin' },
        },
        tools: [],
      },
    },
    { type: 'input_audio_buffer.append', audio: Buffer.alloc(160, 0xff).toString('base64') },
    { type: 'input_audio_buffer.commit' },
    { type: 'input_audio_buffer.clear' },
    {
      type: 'conversation.item.create',
      item: { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'hi' }] },
    },
    {
      type: 'conversation.item.truncate',
      item_id: 'item_0001',
      content_index: 0,
      audio_end_ms: 10,
    },
    { type: 'conversation.item.delete', item_id: 'item_0001' },
    { type: 'response.create', response: { instructions: 'x' } },
    { type: 'response.cancel' },
    { type: 'simulator.caller_said', text: 'hello' },
    { type: 'simulator.dtmf', digit: '1' },
  ];
  const odd: unknown[] = [null, 0, -1, '', 'x', [], {}, true, { type: null }, [null]];

  it('should answer each with an event and keep working', async () => {
    const sim = simulator();
    for (const event of valid) {
      for (const key of Object.keys(event).filter((k) => k !== 'type')) {
        for (const value of odd) {
          const inner = event[key];
          sim.session.receive(JSON.stringify({ ...event, [key]: value }));
          // One level deeper: break each field of the nested object too.
          if (typeof inner === 'object' && inner !== null && !Array.isArray(inner)) {
            for (const innerKey of Object.keys(inner))
              sim.session.receive(
                JSON.stringify({ ...event, [key]: { ...inner, [innerKey]: value } }),
              );
          }
        }
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    sim.sent.length = 0;
    sim.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: {
          input: { format: { type: 'audio/pcmu' }, turn_detection: null },
          output: { format: { type: 'audio/pcmu' } },
        },
      },
    });
    if (sim.session.hasActiveResponse) sim.send({ type: 'response.cancel' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    sim.send({ type: 'response.create', event_id: 'after' });
    await sim.settle();
    expect(sim.sent.find((event) => event.type === 'session.updated')).toBeDefined();
    expect(sim.errors().filter((error) => error.event_id === 'after')).toEqual([]);
  });
});
