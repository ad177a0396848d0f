import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf, waitFor } from './realtime-harness.ts';
import {
  activeTimers,
  connectScripted,
  responseWire,
  sleep,
  type ScriptedCall,
  type ScriptedModelServer,
  type WireEvent,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

/** Answers each response.create with a response that completes at once. */
function answerCreates(event: WireEvent, server: ScriptedModelServer): void {
  if (event.type !== 'response.create') return;
  const metadata = (event.response as { metadata?: unknown } | undefined)?.metadata ?? null;
  const id = `resp_ok_${server.received.filter((e) => e.type === 'response.create').length}`;
  server.send({ type: 'response.created', response: responseWire(id, 'in_progress', metadata) });
  server.send({ type: 'response.done', response: responseWire(id, 'completed', metadata) });
}

/** Records exceptions that escaped to the process (a timer callback that threw). */
function watchUncaught(): { errors: unknown[]; stop: () => void } {
  const errors: unknown[] = [];
  const listener = (error: unknown): void => {
    errors.push(error);
  };
  process.on('uncaughtException', listener);
  return { errors, stop: () => process.off('uncaughtException', listener) };
}

describe('when response.created carries no usable response id', () => {
  it.each([
    ['missing', undefined],
    ['a number', 12345],
    ['null', null],
    ['an object', { id: 'resp_1' }],
  ])(
    'should report a protocol error for an id that is %s, never use it, and keep the process alive past the stall bound',
    async (_name, id) => {
      const uncaught = watchUncaught();
      try {
        const timersBefore = activeTimers();
        call = await connectScripted(
          { onClientEvent: answerCreates },
          { responseStallTimeoutMs: 100 },
        );
        const c = call;
        c.server.send({ type: 'response.created', response: responseWire(id, 'in_progress') });
        const error = await waitFor('the protocol error', () => eventsOf(c.events, 'error')[0]);
        expect(error.code).toBe('CALLGATE_ERR_MODEL_PROTOCOL');
        expect(error.message).toMatch(/response\.id/);
        // Past the stall bound a watched response would have: nothing fires, nothing throws.
        await sleep(400);
        expect(uncaught.errors).toEqual([]);
        expect(c.events.map((e) => e.type)).toEqual(['error']);
        expect(c.server.received.map((e) => e.type)).toEqual(['session.update']);
        // The bad event held nothing up: the next response is created and finishes.
        c.client.createResponse();
        await waitFor('a response', () => eventsOf(c.events, 'response_done')[0]);
        expect(eventsOf(c.events, 'response_done').map((e) => [e.responseId, e.status])).toEqual([
          ['resp_ok_1', 'completed'],
        ]);
        await c.close();
        call = undefined;
        await waitFor('no timers left', () => activeTimers() <= timersBefore, 2_000);
      } finally {
        uncaught.stop();
      }
    },
  );
});

describe('when response.done carries no usable response id', () => {
  it('should report it, keep the running response guarded, and release that response at the stall bound', async () => {
    call = await connectScripted({}, { responseStallTimeoutMs: 300 });
    const c = call;
    c.server.send({ type: 'response.created', response: responseWire('resp_live', 'in_progress') });
    await waitFor('the response', () => eventsOf(c.events, 'response_created')[0]);
    c.server.send({ type: 'response.done', response: responseWire(undefined, 'completed') });
    const error = await waitFor('the protocol error', () => eventsOf(c.events, 'error')[0]);
    expect(error).toMatchObject({ code: 'CALLGATE_ERR_MODEL_PROTOCOL' });
    expect(error.message).toMatch(/response\.done event whose response\.id missing/);
    const done = await waitFor(
      'the stalled response released',
      () => eventsOf(c.events, 'response_done')[0],
      2_000,
    );
    expect(done).toEqual({
      type: 'response_done',
      responseId: 'resp_live',
      status: 'failed',
      reason: 'stalled',
      callIds: [],
    });
    expect(eventsOf(c.events, 'response_done')).toHaveLength(1);
  });
});

describe('when a function call carries no usable call id', () => {
  it.each([
    ['call_id missing', { call_id: undefined }],
    ['call_id a number', { call_id: 7 }],
    ['item_id null', { item_id: null }],
    ['response_id an array', { response_id: ['resp_1'] }],
  ])('should report a protocol error and dispatch nothing when %s', async (_name, override) => {
    call = await connectScripted();
    const c = call;
    c.server.send({ type: 'response.created', response: responseWire('resp_1', 'in_progress') });
    c.server.send({
      type: 'response.function_call_arguments.done',
      response_id: 'resp_1',
      item_id: 'item_1',
      output_index: 0,
      call_id: 'call_1',
      name: 'check_table',
      arguments: '{"party_size": 2}',
      ...override,
    });
    const error = await waitFor('the protocol error', () => eventsOf(c.events, 'error')[0]);
    expect(error.code).toBe('CALLGATE_ERR_MODEL_PROTOCOL');
    expect(error.message).toMatch(/function_call_arguments\.done/);
    expect(eventsOf(c.events, 'function_call')).toEqual([]);
    // No output was sent for a call nobody can name.
    expect(c.server.received.map((e) => e.type)).toEqual(['session.update']);
  });
});

describe('when speech events carry no usable item id', () => {
  it('should report a protocol error and emit no speech event', async () => {
    call = await connectScripted();
    const c = call;
    c.server.send({ type: 'input_audio_buffer.speech_started', audio_start_ms: 120, item_id: 5 });
    c.server.send({
      type: 'input_audio_buffer.speech_stopped',
      audio_end_ms: 'late',
      item_id: 'item_u1',
    });
    await waitFor('two errors', () => eventsOf(c.events, 'error').length === 2);
    expect(c.events.map((e) => e.type)).toEqual(['error', 'error']);
    expect(eventsOf(c.events, 'error').map((e) => e.message)).toEqual([
      expect.stringMatching(/speech_started event whose item_id a number/),
      expect.stringMatching(/speech_stopped event whose audio_end_ms a string/),
    ]);
  });
});
