import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf, startHarness, waitFor, type Harness } from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const audio = Buffer.from(Array.from({ length: 160 }, (_, i) => (i * 7) & 0xff));
const delta = audio.toString('base64');

describe('when audio deltas arrive in any form the protocol allows', () => {
  it('should emit the same audio for keys in any order, whitespace, escapes and lenient base64', async () => {
    harness = await startHarness();
    const frames = [
      // As the provider sends them, then reordered, pretty-printed, with an escaped id and with
      // base64 split over lines (only the full parse reads the last two).
      JSON.stringify({
        type: 'response.output_audio.delta',
        event_id: 'e1',
        response_id: 'resp_a',
        item_id: 'item_a',
        output_index: 0,
        content_index: 0,
        delta,
      }),
      JSON.stringify({
        delta,
        content_index: 0,
        item_id: 'item_a',
        output_index: 0,
        response_id: 'resp_a',
        event_id: 'e2',
        type: 'response.output_audio.delta',
      }),
      JSON.stringify(
        {
          type: 'response.output_audio.delta',
          event_id: 'e3',
          response_id: 'resp_a',
          item_id: 'item_a',
          output_index: 0,
          content_index: 0,
          delta,
        },
        null,
        2,
      ),
      JSON.stringify({
        type: 'response.output_audio.delta',
        event_id: 'e4',
        response_id: 'resp_a',
        item_id: 'item_\u00e9"b"',
        output_index: 0,
        content_index: 0,
        delta,
      }),
      JSON.stringify({
        type: 'response.output_audio.delta',
        event_id: 'e5',
        response_id: 'resp_a',
        item_id: 'item_a',
        output_index: 0,
        content_index: 0,
        delta: `${delta.slice(0, 100)}\n${delta.slice(100)}`,
      }),
    ];
    for (const frame of frames) harness.connection.session.sendRaw(frame);
    const deltas = await waitFor('every delta', () => {
      const seen = eventsOf(harness?.events ?? [], 'audio_delta');
      return seen.length === frames.length ? seen : undefined;
    });
    expect(deltas.map((e) => [e.responseId, e.itemId])).toEqual([
      ['resp_a', 'item_a'],
      ['resp_a', 'item_a'],
      ['resp_a', 'item_a'],
      ['resp_a', 'item_\u00e9"b"'],
      ['resp_a', 'item_a'],
    ]);
    for (const e of deltas) expect(e.audio).toEqual(audio);
    expect(eventsOf(harness.events, 'error')).toEqual([]);
  });

  it('should report a delta-looking frame that is not JSON and emit no audio for it', async () => {
    harness = await startHarness();
    const good = JSON.stringify({
      type: 'response.output_audio.delta',
      event_id: 'e1',
      response_id: 'resp_a',
      item_id: 'item_a',
      output_index: 0,
      content_index: 0,
      delta,
    });
    harness.connection.session.sendRaw(`${good.slice(0, -1)},}`);
    harness.connection.session.sendRaw(good.replace('"item_a"', '"item\u0001a"'));
    const errors = await waitFor('two errors', () => {
      const seen = eventsOf(harness?.events ?? [], 'error');
      return seen.length === 2 ? seen : undefined;
    });
    expect(errors.map((e) => e.code)).toEqual([
      'CALLGATE_ERR_MODEL_PROTOCOL',
      'CALLGATE_ERR_MODEL_PROTOCOL',
    ]);
    expect(eventsOf(harness.events, 'audio_delta')).toEqual([]);
  });
});
