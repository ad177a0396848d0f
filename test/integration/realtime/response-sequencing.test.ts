import { afterEach, describe, expect, it } from 'vitest';
import { callerSpeech, clientWire, conversationWire, eventsOf, startHarness, streamFrames, waitFor, type Harness } from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** Checks the wire: a response.create only goes out when no response is active. */
function assertOneActiveAtATime(wire: readonly string[]): void {
  let active = false;
  for (const entry of wire) {
    if (entry === '> response.create') expect(active, 'a response.create went out while a response was active').toBe(false);
    if (entry === '< response.created') active = true;
    if (entry === '< response.done') active = false;
  }
}

describe('when three responses are asked for at the same moment', () => {
  it('should run them one after another and never send a create while one is active', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 } });
    const { client, connection, events } = harness;
    client.addSystemMessage('The booking A-1 is confirmed.');
    client.createResponse({ instructions: 'one' });
    client.createResponse({ instructions: 'two' });
    client.createResponse({ instructions: 'three' });
    await waitFor('three responses', () => eventsOf(events, 'response_done').length === 3, 20_000);
    const wire = conversationWire(connection);
    assertOneActiveAtATime(wire);
    expect(wire.filter((entry) => entry === '> response.create')).toHaveLength(3);
    expect(connection.session.wire.filter((r) => r.type === 'error')).toEqual([]);
    expect(eventsOf(events, 'error')).toEqual([]);
    expect(eventsOf(events, 'response_done').map((e) => e.status)).toEqual(['completed', 'completed', 'completed']);
    // The system message is spoken by the first response.
    expect(connection.session.said[0]?.text).toBe('The booking A-1 is confirmed.');
  });
});

describe('when the server starts a response just as the client asks for one', () => {
  it('should treat conversation_already_has_active_response as a wait, not a failure', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 } });
    const { client, connection, events } = harness;
    // The client's create is on its way; the caller speaks (side channel) before it arrives,
    // so the server's own response wins and refuses the client's.
    client.createResponse({ instructions: 'greet' });
    connection.session.callerSays('Hello?');
    await waitFor('two responses', () => eventsOf(events, 'response_done').length === 2, 20_000);
    const refusals = connection.session.wire.filter((r) => r.type === 'error');
    expect(refusals.map((r) => (r.event.error as { code: string }).code)).toEqual(['conversation_already_has_active_response']);
    expect(eventsOf(events, 'error')).toEqual([]);
    expect(clientWire(connection).filter((type) => !type.startsWith('simulator.'))).toEqual(['session.update', 'response.create', 'response.create']);
    // The retry waits for the server's response to finish.
    const wire = conversationWire(connection);
    expect(wire.lastIndexOf('> response.create')).toBeGreaterThan(wire.indexOf('< response.done'));
    expect(connection.session.responses.map((r) => r.trigger)).toEqual(['side_channel', 'client']);
  });
});

describe('when the queue of waiting responses is full', () => {
  it('should refuse more with CALLGATE_ERR_MODEL_BUSY instead of growing', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 }, client: { maxQueuedResponses: 2 } });
    const { client, events } = harness;
    for (let i = 0; i < 4; i++) client.createResponse();
    const busy = eventsOf(events, 'error').filter((e) => e.code === 'CALLGATE_ERR_MODEL_BUSY');
    expect(busy).toHaveLength(1);
    await waitFor('three responses', () => eventsOf(events, 'response_done').length === 3, 20_000);
  });
});

describe('when a response is asked for while the caller is speaking', () => {
  it('should hold it until the utterance ends, and release it when the buffer is cleared', async () => {
    harness = await startHarness({ config: { instructions: '', inputFormat: 'pcmu', outputFormat: 'pcmu', turnDetection: { type: 'server_vad', createResponse: false } } });
    const { client, connection, events } = harness;
    // Speech with no trailing silence: the utterance is still open.
    streamFrames(client, await callerSpeech('Hold on, I am still talking'));
    await waitFor('speech_started', () => eventsOf(events, 'speech_started')[0]);
    client.createResponse();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(clientWire(connection)).toEqual(['session.update']);
    client.clearAudio();
    await waitFor('the held response', () => eventsOf(events, 'response_done')[0]);
    expect(clientWire(connection)).toEqual(['session.update', 'input_audio_buffer.clear', 'response.create']);
  });
});
