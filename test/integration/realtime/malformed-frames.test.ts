import { afterEach, describe, expect, it } from 'vitest';
import { clientWire, eventsOf, startHarness, waitFor, type Harness } from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

async function stillWorks(h: Harness): Promise<void> {
  const before = eventsOf(h.events, 'response_done').length;
  h.client.createResponse();
  await waitFor(
    'a response after the bad frame',
    () => eventsOf(h.events, 'response_done').length === before + 1,
  );
}

describe('when the model sends a frame that is not JSON', () => {
  it('should emit a protocol error and keep the session', async () => {
    harness = await startHarness();
    harness.connection.session.sendRaw('{"type": "response.done", ');
    const error = await waitFor('the error', () => eventsOf(harness?.events ?? [], 'error')[0]);
    expect(error.code).toBe('CALLGATE_ERR_MODEL_PROTOCOL');
    expect(error.message).toMatch(/not JSON/);
    await stillWorks(harness);
  });

  it.each([
    ['an array', '[1,2,3]'],
    ['an event without a type', '{"event_id":"x"}'],
    ['a known event with a broken shape', '{"type":"response.output_audio.delta","delta":42}'],
  ])('should emit a protocol error for %s', async (_name, frame) => {
    harness = await startHarness();
    harness.connection.session.sendRaw(frame);
    const error = await waitFor('the error', () => eventsOf(harness?.events ?? [], 'error')[0]);
    expect(error.code).toBe('CALLGATE_ERR_MODEL_PROTOCOL');
    await stillWorks(harness);
  });
});

describe('when the model sends an unknown event type', () => {
  it('should report the type once and ignore repeats', async () => {
    harness = await startHarness();
    for (let i = 0; i < 3; i++)
      harness.connection.session.sendRaw('{"type":"response.hologram.delta","event_id":"e"}');
    await stillWorks(harness);
    const errors = eventsOf(harness.events, 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/unknown event type response\.hologram\.delta/);
  });
});

describe('when the model sends a frame above the size limit', () => {
  it('should report CALLGATE_ERR_MODEL_FRAME_TOO_LARGE and disconnect with reason protocol', async () => {
    harness = await startHarness({ client: { maxFrameBytes: 64 * 1024 } });
    harness.connection.session.sendRaw(
      JSON.stringify({ type: 'response.output_audio.delta', delta: 'A'.repeat(100 * 1024) }),
    );
    const disconnected = await waitFor(
      'disconnected',
      () => eventsOf(harness?.events ?? [], 'disconnected')[0],
    );
    expect(disconnected.reason).toBe('protocol');
    expect(eventsOf(harness.events, 'error').map((e) => e.code)).toEqual([
      'CALLGATE_ERR_MODEL_FRAME_TOO_LARGE',
    ]);
    expect(eventsOf(harness.events, 'audio_delta')).toEqual([]);
  });
});

describe('when function-call arguments are not JSON', () => {
  it('should report the call and answer it with an error output so the turn can complete', async () => {
    harness = await startHarness();
    const h = harness;
    h.client.createResponse();
    await waitFor('the greeting', () => eventsOf(h.events, 'response_done')[0]);
    // A function call the simulated model "generated" with broken arguments.
    h.connection.session.sendRaw(
      JSON.stringify({
        type: 'response.created',
        event_id: 'e1',
        response: {
          id: 'resp_x',
          object: 'realtime.response',
          status: 'in_progress',
          status_details: null,
          output: [],
        },
      }),
    );
    h.connection.session.sendRaw(
      JSON.stringify({
        type: 'response.function_call_arguments.done',
        event_id: 'e2',
        response_id: 'resp_x',
        item_id: 'item_x',
        output_index: 0,
        call_id: 'call_x',
        name: 'refund',
        arguments: '{"order_id": A-1',
      }),
    );
    const error = await waitFor('the error', () => eventsOf(h.events, 'error')[0]);
    expect(error).toMatchObject({
      code: 'CALLGATE_ERR_MODEL_BAD_TOOL_ARGUMENTS',
      callId: 'call_x',
    });
    expect(eventsOf(h.events, 'function_call')).toEqual([]);
    await waitFor('the error output', () =>
      h.connection.session.wire.find((r) => r.type === 'conversation.item.create'),
    );
    const output = h.connection.session.wire.find((r) => r.type === 'conversation.item.create')
      ?.event.item as { type: string; call_id: string; output: string };
    expect(output).toMatchObject({ type: 'function_call_output', call_id: 'call_x' });
    expect(JSON.parse(output.output)).toHaveProperty('error');
  });
});

describe('when a response is created but never finishes', () => {
  it('should give it up after the stall bound, cancel it, and run the queued response', async () => {
    // Long enough for the queued response's own pauses (speech rendering), short for the test.
    harness = await startHarness({ client: { responseStallTimeoutMs: 1_000 } });
    const h = harness;
    h.connection.session.sendRaw(
      JSON.stringify({
        type: 'response.created',
        event_id: 'e1',
        response: {
          id: 'resp_phantom',
          object: 'realtime.response',
          status: 'in_progress',
          status_details: null,
          output: [],
        },
      }),
    );
    await waitFor('the phantom response', () => eventsOf(h.events, 'response_created')[0]);
    h.client.createResponse();
    expect(clientWire(h.connection)).toEqual(['session.update']);
    await waitFor('the queued response', () => eventsOf(h.events, 'response_done')[1], 5_000);
    expect(
      eventsOf(h.events, 'response_done').map((e) => [e.responseId, e.status, e.reason]),
    ).toEqual([
      ['resp_phantom', 'failed', 'stalled'],
      [eventsOf(h.events, 'response_created')[1]?.responseId, 'completed', undefined],
    ]);
    // The simulator's response_cancel_not_active for the phantom is benign and not reported.
    expect(eventsOf(h.events, 'error').map((e) => e.code)).toEqual(['CALLGATE_ERR_MODEL_TIMEOUT']);
    expect(clientWire(h.connection)).toEqual([
      'session.update',
      'response.cancel',
      'response.create',
    ]);
  });
});

describe('when the model never answers session.update', () => {
  it('should reject configure with CALLGATE_ERR_MODEL_TIMEOUT after the bounded wait', async () => {
    harness = await startHarness({
      simulator: { ignoreSessionUpdate: true },
      client: { sessionUpdateTimeoutMs: 300 },
      config: null,
    });
    const started = Date.now();
    await expect(harness.client.configure({ instructions: '' })).rejects.toMatchObject({
      code: 'CALLGATE_ERR_MODEL_TIMEOUT',
    });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(eventsOf(harness.events, 'error').map((e) => e.code)).toEqual([
      'CALLGATE_ERR_MODEL_TIMEOUT',
    ]);
    expect(harness.client.connected).toBe(true);
  });
});

describe('when the client sends something the model refuses', () => {
  it('should surface the provider error for a truncate of an unknown item', async () => {
    harness = await startHarness();
    const h = harness;
    h.client.truncate('item_missing', 100);
    const error = await waitFor('the error', () => eventsOf(h.events, 'error')[0]);
    expect(error).toMatchObject({
      code: 'CALLGATE_ERR_MODEL_REJECTED',
      providerCode: 'item_truncate_invalid_item_id',
    });
    expect(clientWire(h.connection)).toEqual(['session.update', 'conversation.item.truncate']);
  });

  it('should surface the provider error for a truncate of a caller item', async () => {
    harness = await startHarness();
    const h = harness;
    h.connection.session.callerSays('Hello');
    await waitFor('the answer', () => eventsOf(h.events, 'response_done')[0]);
    const callerItem = h.connection.session.heard[0];
    h.client.truncate(callerItem?.kind === 'caller_said' ? callerItem.itemId : '', 0);
    const error = await waitFor('the error', () => eventsOf(h.events, 'error')[0]);
    expect(error).toMatchObject({
      code: 'CALLGATE_ERR_MODEL_REJECTED',
      providerCode: 'unsupported_content_type',
    });
  });

  it('should refuse a commit of an empty buffer with input_audio_buffer_commit_empty', async () => {
    harness = await startHarness({
      config: { instructions: '', inputFormat: 'pcmu', outputFormat: 'pcmu', turnDetection: null },
    });
    const h = harness;
    h.client.commitAudio();
    const error = await waitFor('the error', () => eventsOf(h.events, 'error')[0]);
    expect(error).toMatchObject({
      code: 'CALLGATE_ERR_MODEL_REJECTED',
      providerCode: 'input_audio_buffer_commit_empty',
    });
    expect(error.message).toMatch(/input_audio_buffer\.commit/);
  });

  it('should not report a cancel that arrived after the response finished', async () => {
    harness = await startHarness();
    const h = harness;
    h.connection.session.sendRaw(
      JSON.stringify({
        type: 'error',
        event_id: 'e',
        error: {
          type: 'invalid_request_error',
          code: 'response_cancel_not_active',
          message: 'Cancellation failed: no active response found',
          param: null,
          event_id: null,
        },
      }),
    );
    await stillWorks(h);
    expect(eventsOf(h.events, 'error')).toEqual([]);
  });
});
