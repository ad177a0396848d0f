import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  PCMU_CONFIG,
  clientWire,
  eventsOf,
  startHarness,
  waitFor,
  type Harness,
} from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('when the client connects', () => {
  it('should ask for the model in the URL with Bearer auth and no beta header', async () => {
    harness = await startHarness({ config: null });
    expect(harness.connection.handshake).toEqual({
      path: '/v1/realtime',
      model: 'gpt-realtime',
      authorization: 'bearer',
      openaiBeta: undefined,
    });
    expect(harness.client.providerSessionId).toBe('sess_0001');
  });
});

describe('when the session is configured', () => {
  it('should send one GA session.update and resolve on session.updated', async () => {
    harness = await startHarness({ config: null });
    await harness.client.configure({
      ...PCMU_CONFIG,
      voice: 'cedar',
      tools: [
        {
          name: 'refund',
          description: 'Refunds an order',
          parameters: z.object({ order_id: z.string(), amount: z.number().positive() }),
        },
      ],
      toolChoice: 'auto',
    });
    expect(clientWire(harness.connection)).toEqual(['session.update']);
    const effective = harness.connection.session.configuration;
    expect(effective.type).toBe('realtime');
    expect(effective.audio?.input?.format).toEqual({ type: 'audio/pcmu' });
    expect(effective.audio?.output?.format).toEqual({ type: 'audio/pcmu' });
    expect(effective.audio?.output?.voice).toBe('cedar');
    expect(effective.audio?.input?.turn_detection).toMatchObject({
      type: 'server_vad',
      silence_duration_ms: 500,
    });
    expect(effective.tools?.[0]).toMatchObject({
      type: 'function',
      name: 'refund',
      parameters: { type: 'object', required: ['order_id', 'amount'] },
    });
  });
});

describe('when a response is asked for', () => {
  it('should deliver the spoken greeting as G.711 audio and its transcript', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    client.createResponse();
    const done = await waitFor('response_done', () => eventsOf(events, 'response_done')[0]);
    expect(done.status).toBe('completed');
    const said = connection.session.said[0];
    expect(said?.text).toMatch(/^Hello, thanks for calling/);
    const audioBytes = eventsOf(events, 'audio_delta').reduce(
      (sum, event) => sum + event.audio.length,
      0,
    );
    // 8 kHz μ-law: 8 bytes per ms, exactly what the simulator says it sent.
    expect(audioBytes).toBe((said?.totalAudioMs ?? 0) * 8);
    expect(said?.audioMsSent).toBe(said?.totalAudioMs);
    expect(said?.totalAudioMs).toBeGreaterThan(3000);
    const transcript = eventsOf(events, 'transcript_done').find(
      (event) => event.role === 'assistant',
    );
    expect(transcript?.transcript).toBe(said?.text);
    expect(
      eventsOf(events, 'transcript_delta')
        .map((event) => event.delta)
        .join(''),
    ).toBe(said?.text);
    expect(
      events.map((event) => event.type).filter((type) => type.startsWith('response_')),
    ).toEqual(['response_created', 'response_done']);
  });

  it('should deliver 24 kHz PCM when asked for audio/pcm', async () => {
    harness = await startHarness({ config: { ...PCMU_CONFIG, outputFormat: 'pcm24k' } });
    const { client, connection, events } = harness;
    client.createResponse();
    await waitFor('response_done', () => eventsOf(events, 'response_done')[0]);
    const audioBytes = eventsOf(events, 'audio_delta').reduce(
      (sum, event) => sum + event.audio.length,
      0,
    );
    expect(audioBytes).toBe((connection.session.said[0]?.totalAudioMs ?? 0) * 48);
  });
});

describe('when caller audio is sent', () => {
  it('should reach the model as input_audio_buffer.append frames of the same bytes', async () => {
    harness = await startHarness();
    const { client, connection } = harness;
    for (let i = 0; i < 50; i++) client.sendAudio(Buffer.alloc(160, 0xff));
    await waitFor(
      '50 appends',
      () =>
        connection.session.receivedTypes().filter((t) => t === 'input_audio_buffer.append')
          .length === 50,
    );
    const appends = connection.session.wire.filter(
      (record) => record.type === 'input_audio_buffer.append',
    );
    expect(appends.every((record) => record.event.audio === '<160 bytes>')).toBe(true);
    expect(client.droppedAudioFrames).toBe(0);
  });
});

describe('when input transcription is on and the caller says something', () => {
  it('should emit the caller transcript before the answer', async () => {
    harness = await startHarness({
      config: { ...PCMU_CONFIG, inputTranscriptionModel: 'gpt-4o-mini-transcribe' },
    });
    const { connection, events } = harness;
    connection.session.callerSays('I want to book a table.');
    await waitFor('the answer', () => eventsOf(events, 'response_done')[0]);
    const transcripts = eventsOf(events, 'transcript_done');
    expect(transcripts.map((t) => [t.role, t.transcript])).toEqual([
      ['user', 'I want to book a table.'],
      ['assistant', 'Let me check what we have free.'],
    ]);
    expect(
      eventsOf(events, 'transcript_delta')
        .filter((t) => t.role === 'user')
        .map((t) => t.delta),
    ).toEqual(['I want to book a table.']);
  });
});

describe('when the model refuses a session.update', () => {
  it('should reject configure at once with the provider code, not after the timeout', async () => {
    harness = await startHarness({ client: { sessionUpdateTimeoutMs: 5_000 } });
    const { client, events } = harness;
    client.createResponse();
    await waitFor('assistant audio', () => eventsOf(events, 'response_done')[0]);
    const started = Date.now();
    // The voice cannot change once the assistant has spoken.
    await expect(client.configure({ ...PCMU_CONFIG, voice: 'cedar' })).rejects.toMatchObject({
      code: 'CALLGATE_ERR_MODEL_REJECTED',
    });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(eventsOf(events, 'error')[0]).toMatchObject({
      code: 'CALLGATE_ERR_MODEL_REJECTED',
      providerCode: 'invalid_value',
    });
    expect(eventsOf(events, 'error')[0]?.message).toMatch(/session\.update/);
  });
});
