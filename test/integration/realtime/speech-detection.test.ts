import { afterEach, describe, expect, it } from 'vitest';
import {
  callerSpeech,
  clientWire,
  eventsOf,
  silence,
  startHarness,
  streamFrames,
  synthesizer,
  waitFor,
  type Harness,
} from './realtime-harness.ts';
import { EnergyVad } from '../../../gateway/realtime/simulator/energy-vad.ts';
import { decodeMulaw } from '../../../gateway/realtime/simulator/g711.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** Where speech starts and ends inside a rendered phrase (espeak adds a little silence around it). */
function voicedSpan(audio: Buffer): { startMs: number; endMs: number } {
  const vad = new EnergyVad({ sampleRate: 8000, silenceDurationMs: 500 });
  const transitions = [...vad.push(decodeMulaw(audio)), ...vad.push(decodeMulaw(silence(1000)))];
  const start = transitions.find((t) => t.type === 'start');
  const stop = transitions.find((t) => t.type === 'stop');
  if (start === undefined || stop === undefined) throw new Error('the phrase has no speech in it');
  return { startMs: start.atMs, endMs: stop.atMs - 500 };
}

describe('when the caller speaks (espeak-ng speech as μ-law)', () => {
  it('should report speech started and stopped at the offsets of the speech in the stream', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    const phrase = await callerSpeech('I would like to book a table for four people tonight.');
    const span = voicedSpan(phrase);
    streamFrames(client, silence(1000));
    streamFrames(client, phrase);
    streamFrames(client, silence(1500));
    const stopped = await waitFor('speech_stopped', () => eventsOf(events, 'speech_stopped')[0]);
    const started = eventsOf(events, 'speech_started')[0];
    expect(started?.audioStartMs).toBe(1000 + span.startMs);
    // Stop is reported once the silence duration (500 ms) has passed after the last voiced frame.
    expect(stopped.audioEndMs).toBe(1000 + span.endMs + 500);
    expect(started?.itemId).toBe(stopped.itemId);
    expect(connection.session.heard).toEqual([
      {
        kind: 'utterance',
        itemId: stopped.itemId,
        audioStartMs: 1000 + span.startMs,
        audioEndMs: stopped.audioEndMs,
        atMs: expect.any(Number) as number,
      },
    ]);
    // Server VAD with create_response: the model answers the utterance on its own.
    await waitFor('the answer', () => eventsOf(events, 'response_done')[0]);
    expect(connection.session.toolCalls.map((call) => call.name)).toEqual(['check_availability']);
  });

  it('should count two utterances separated by a long pause', async () => {
    harness = await startHarness({
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', createResponse: false },
      },
    });
    const { client, connection, events } = harness;
    const phrase = await callerSpeech('Yes please.');
    streamFrames(client, phrase);
    streamFrames(client, silence(1200));
    streamFrames(client, phrase);
    streamFrames(client, silence(1200));
    await waitFor('two utterances', () => eventsOf(events, 'speech_stopped').length === 2);
    expect(eventsOf(events, 'speech_started')).toHaveLength(2);
    expect(connection.session.utterances).toBe(2);
    expect(clientWire(connection)).toEqual(['session.update']);
  });
});

describe('when the caller audio is 24 kHz PCM', () => {
  it('should detect the speech in it as well', async () => {
    harness = await startHarness({
      config: {
        instructions: '',
        inputFormat: 'pcm24k',
        outputFormat: 'pcm24k',
        turnDetection: { type: 'server_vad', createResponse: false },
      },
    });
    const { client, events } = harness;
    const phrase = await synthesizer.render('Change my booking to nine please.', 'pcm24k');
    const quiet = Buffer.alloc(24 * 2 * 800);
    for (const audio of [quiet, phrase, quiet]) {
      // 20 ms of 24 kHz 16-bit PCM is 960 bytes.
      for (let offset = 0; offset < audio.length; offset += 960)
        client.sendAudio(audio.subarray(offset, offset + 960));
    }
    const stopped = await waitFor('speech_stopped', () => eventsOf(events, 'speech_stopped')[0]);
    const started = eventsOf(events, 'speech_started')[0];
    expect(started?.audioStartMs).toBeGreaterThanOrEqual(800);
    expect(started?.audioStartMs).toBeLessThan(1000);
    expect(stopped.audioEndMs).toBeGreaterThan(800 + 1000);
    expect(stopped.audioEndMs).toBeLessThanOrEqual(800 + phrase.length / 48 + 500);
  });
});

describe('when the caller is silent', () => {
  it('should report no speech and start no response', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    streamFrames(client, silence(3000));
    await waitFor(
      'all audio received',
      () =>
        connection.session.receivedTypes().filter((t) => t === 'input_audio_buffer.append')
          .length === 150,
    );
    expect(eventsOf(events, 'speech_started')).toEqual([]);
    expect(eventsOf(events, 'speech_stopped')).toEqual([]);
    expect(connection.session.heard).toEqual([]);
    expect(connection.session.responses).toEqual([]);
  });
});
