import { afterEach, describe, expect, it } from 'vitest';
import {
  callerSpeech,
  clientWire,
  eventsOf,
  silence,
  startHarness,
  streamFrames,
  waitFor,
  type Harness,
} from './realtime-harness.ts';
import type {
  PlaybackPosition,
  RealtimeEvent,
} from '../../../gateway/realtime/realtime-session.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** A playout that runs `behindMs` behind what was received (a jitter buffer), and records what it reported. */
function laggingPlayout(
  events: RealtimeEvent[],
  behindMs: number,
): PlaybackPosition & { reported: number[] } {
  const reported: number[] = [];
  return {
    reported,
    playedMs(itemId) {
      const bytes = eventsOf(events, 'audio_delta')
        .filter((e) => e.itemId === itemId)
        .reduce((sum, e) => sum + e.audio.length, 0);
      const played = Math.max(0, bytes / 8 - behindMs);
      reported.push(played);
      return played;
    },
  };
}

function receivedMs(events: RealtimeEvent[]): number {
  return eventsOf(events, 'audio_delta').reduce((sum, e) => sum + e.audio.length, 0) / 8;
}

async function bargeIn(h: Harness): Promise<void> {
  const phrase = await callerSpeech('Sorry, can I ask something?');
  streamFrames(h.client, phrase);
  streamFrames(h.client, silence(700));
}

describe('when the caller speaks over the model and the server does not interrupt by itself', () => {
  it('should cancel the response and truncate the item at the played offset', async () => {
    const events: RealtimeEvent[] = [];
    const playout = laggingPlayout(events, 250);
    harness = await startHarness({
      simulator: { speechSpeed: 3 },
      client: { playback: playout },
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', interruptResponse: false, createResponse: false },
      },
    });
    const h = harness;
    h.client.onAny((event) => events.push(event));
    h.client.createResponse();
    await waitFor('1.5 s of greeting audio', () => receivedMs(events) >= 1500);
    await bargeIn(h);
    const done = await waitFor(
      'the cancelled response',
      () => eventsOf(events, 'response_done')[0],
    );
    expect(done).toMatchObject({ status: 'cancelled', reason: 'client_cancelled' });
    const started = eventsOf(events, 'speech_started')[0];
    const playedMs = Math.floor(playout.reported[0] ?? NaN);
    expect(started?.interruption).toEqual({
      itemId: h.connection.session.said[0]?.itemId,
      playedMs,
      cancelSent: true,
    });
    await waitFor('the truncation', () => eventsOf(events, 'item_truncated')[0]);
    expect(clientWire(h.connection)).toEqual([
      'session.update',
      'response.create',
      'response.cancel',
      'conversation.item.truncate',
    ]);
    const truncate = h.connection.session.wire.find((r) => r.type === 'conversation.item.truncate');
    expect(truncate?.event).toMatchObject({
      item_id: started?.interruption?.itemId,
      content_index: 0,
      audio_end_ms: playedMs,
    });
    const said = h.connection.session.said[0];
    expect(said?.status).toBe('cancelled');
    expect(said?.truncatedAtMs).toBe(playedMs);
    expect(said?.audioMsSent).toBeLessThan(said?.totalAudioMs ?? 0);
    expect(eventsOf(events, 'error')).toEqual([]);
  });
});

describe('when the server cancels on speech by itself (interrupt_response)', () => {
  it('should not send a cancel but still truncate at the played offset', async () => {
    const events: RealtimeEvent[] = [];
    const playout = laggingPlayout(events, 400);
    harness = await startHarness({
      simulator: { speechSpeed: 3 },
      client: { playback: playout },
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', interruptResponse: true, createResponse: false },
      },
    });
    const h = harness;
    h.client.onAny((event) => events.push(event));
    h.client.createResponse();
    await waitFor('1.5 s of greeting audio', () => receivedMs(events) >= 1500);
    await bargeIn(h);
    const done = await waitFor(
      'the cancelled response',
      () => eventsOf(events, 'response_done')[0],
    );
    expect(done).toMatchObject({ status: 'cancelled', reason: 'turn_detected' });
    await waitFor('the truncation', () => eventsOf(events, 'item_truncated')[0]);
    expect(clientWire(h.connection)).toEqual([
      'session.update',
      'response.create',
      'conversation.item.truncate',
    ]);
    expect(h.connection.session.said[0]?.truncatedAtMs).toBe(
      Math.floor(playout.reported[0] ?? NaN),
    );
    expect(eventsOf(events, 'speech_started')[0]?.interruption?.cancelSent).toBe(false);
  });
});

describe('when the response is done but its audio is still playing', () => {
  it('should truncate without a cancel', async () => {
    const events: RealtimeEvent[] = [];
    // speechSpeed 0: the whole line arrives at once; the caller has heard only the first 1.2 s.
    const playout = { playedMs: () => 1200 };
    harness = await startHarness({
      client: { playback: playout },
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', createResponse: false },
      },
    });
    const h = harness;
    h.client.onAny((event) => events.push(event));
    h.client.createResponse();
    await waitFor('the response', () => eventsOf(events, 'response_done')[0]);
    await bargeIn(h);
    await waitFor('the truncation', () => eventsOf(events, 'item_truncated')[0]);
    expect(clientWire(h.connection)).toEqual([
      'session.update',
      'response.create',
      'conversation.item.truncate',
    ]);
    expect(h.connection.session.said[0]?.truncatedAtMs).toBe(1200);
    expect(h.connection.session.said[0]?.status).toBe('completed');
  });

  it('should not truncate what the caller heard completely', async () => {
    const events: RealtimeEvent[] = [];
    harness = await startHarness({
      client: { playback: { playedMs: () => 600_000 } },
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', createResponse: false },
      },
    });
    const h = harness;
    h.client.onAny((event) => events.push(event));
    h.client.createResponse();
    await waitFor('the response', () => eventsOf(events, 'response_done')[0]);
    await bargeIn(h);
    await waitFor('speech stopped', () => eventsOf(events, 'speech_stopped')[0]);
    expect(clientWire(h.connection)).toEqual(['session.update', 'response.create']);
    expect(eventsOf(events, 'speech_started')[0]?.interruption).toBeUndefined();
  });
});

describe('when a truncation names more audio than the item has', () => {
  it('should clamp it to the audio received, which the provider accepts', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    client.createResponse();
    await waitFor('the response', () => eventsOf(events, 'response_done')[0]);
    const said = connection.session.said[0];
    client.truncate(said?.itemId ?? '', 10_000_000);
    const truncated = await waitFor('the truncation', () => eventsOf(events, 'item_truncated')[0]);
    expect(truncated.audioEndMs).toBe(said?.totalAudioMs);
    expect(eventsOf(events, 'error')).toEqual([]);
  });
});

describe('when the caller starts speaking while a response.create is still on its way', () => {
  it('should cancel the response as soon as the server creates it, even with interrupt_response', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 1 } });
    const h = harness;
    h.client.createResponse();
    // The server's speech_started overtakes the create: it reaches the client before response.created.
    h.connection.session.sendRaw(
      JSON.stringify({
        type: 'input_audio_buffer.speech_started',
        event_id: 'e1',
        audio_start_ms: 0,
        item_id: 'item_caller',
      }),
    );
    const done = await waitFor('the response', () => eventsOf(h.events, 'response_done')[0]);
    expect(done).toMatchObject({ status: 'cancelled', reason: 'client_cancelled' });
    expect(clientWire(h.connection)).toEqual([
      'session.update',
      'response.create',
      'response.cancel',
    ]);
    expect(eventsOf(h.events, 'speech_started')[0]?.interruption).toBeUndefined();
  });
});
