import { describe, expect, it } from 'vitest';
import {
  AudioDeltaReader,
  type AudioDeltaFields,
} from '../../../gateway/realtime/openai-audio-delta-reader.ts';

/** What the full parse makes of a frame (the session's other path), for comparison. */
function fullParse(frame: Buffer): AudioDeltaFields | 'not a delta' | 'not JSON' {
  let event: unknown;
  try {
    event = JSON.parse(frame.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  const e = event as { type?: unknown; response_id?: unknown; item_id?: unknown; delta?: unknown };
  if (typeof event !== 'object' || event === null || e.type !== 'response.output_audio.delta')
    return 'not a delta';
  if (
    typeof e.response_id !== 'string' ||
    typeof e.item_id !== 'string' ||
    typeof e.delta !== 'string'
  )
    return 'not a delta';
  return { responseId: e.response_id, itemId: e.item_id, audio: Buffer.from(e.delta, 'base64') };
}

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const audio = Buffer.from(Array.from({ length: 800 }, (_, i) => (i * 37) & 0xff));
const deltaEvent = {
  type: 'response.output_audio.delta',
  event_id: 'event_0042',
  response_id: 'resp_0007',
  item_id: 'item_0003',
  output_index: 0,
  content_index: 0,
  delta: audio.toString('base64'),
};

function frame(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

describe('when an audio delta arrives as the provider sends it', () => {
  it('should read its ids and audio without the full parse', () => {
    const read = new AudioDeltaReader().read(frame(JSON.stringify(deltaEvent)));
    expect(read).toEqual({ responseId: 'resp_0007', itemId: 'item_0003', audio });
  });

  it.each([
    [
      'keys in another order',
      JSON.stringify({
        delta: deltaEvent.delta,
        item_id: 'item_0003',
        content_index: 0,
        response_id: 'resp_0007',
        type: deltaEvent.type,
      }),
    ],
    ['whitespace between tokens', JSON.stringify(deltaEvent, null, 2)],
    [
      'fields the reader does not know',
      JSON.stringify({ ...deltaEvent, obfuscation: 'abc', sequence: -1.5e3 }),
    ],
    ['no audio', JSON.stringify({ ...deltaEvent, delta: '' })],
    [
      'one byte of audio',
      JSON.stringify({ ...deltaEvent, delta: Buffer.from([0xfb]).toString('base64') }),
    ],
    [
      'two bytes of audio',
      JSON.stringify({ ...deltaEvent, delta: Buffer.from([0xfb, 0xff]).toString('base64') }),
    ],
    [
      'a repeated key (the last one counts)',
      '{"type":"response.output_audio.delta","item_id":"a","item_id":"b","response_id":"r","delta":"AAAA"}',
    ],
  ])('should read one with %s as the full parse does', (_name, text) => {
    const read = new AudioDeltaReader().read(frame(text));
    expect(read).toBeDefined();
    expect(read).toEqual(fullParse(frame(text)));
  });

  it('should make the id strings once for a run of deltas of the same item', () => {
    const reader = new AudioDeltaReader();
    const first = reader.read(frame(JSON.stringify(deltaEvent)));
    const second = reader.read(frame(JSON.stringify({ ...deltaEvent, event_id: 'event_0043' })));
    const other = reader.read(frame(JSON.stringify({ ...deltaEvent, item_id: 'item_0004' })));
    expect(second?.itemId).toBe(first?.itemId);
    expect(other?.itemId).toBe('item_0004');
    expect(other?.responseId).toBe('resp_0007');
  });
});

describe('when a frame is not a plain audio delta', () => {
  it.each([
    [
      'another event type',
      JSON.stringify({ ...deltaEvent, type: 'response.output_audio_transcript.delta' }),
    ],
    [
      'a type given twice, the last another',
      `${JSON.stringify(deltaEvent).slice(0, -1)},"type":"response.done"}`,
    ],
    ['a delta given twice', `${JSON.stringify(deltaEvent).slice(0, -1)},"delta":"AAAA"}`],
    [
      'a delta that is a number',
      '{"type":"response.output_audio.delta","delta":42,"item_id":"i","response_id":"r"}',
    ],
    ['no item id', JSON.stringify({ ...deltaEvent, item_id: undefined })],
    ['no response id', JSON.stringify({ ...deltaEvent, response_id: undefined })],
    ['an item id that is a number', JSON.stringify({ ...deltaEvent, item_id: 3 })],
    ['an escaped id', JSON.stringify({ ...deltaEvent, item_id: 'item_"3"' })],
    ['an escaped key', JSON.stringify(deltaEvent).replace('"item_id"', '"item\\u005fid"')],
    ['a non-ASCII id', JSON.stringify({ ...deltaEvent, item_id: 'item_é' })],
    ['a nested value', JSON.stringify({ ...deltaEvent, extra: { a: 1 } })],
    ['a literal value', JSON.stringify({ ...deltaEvent, extra: null })],
    ['base64 without padding', JSON.stringify({ ...deltaEvent, delta: 'QQ' })],
    ['base64url', JSON.stringify({ ...deltaEvent, delta: '-_-_' })],
    ['base64 with a line break', JSON.stringify({ ...deltaEvent, delta: 'QUFB\nQUFB' })],
    ['padding inside the base64', JSON.stringify({ ...deltaEvent, delta: 'QQ==QUFB' })],
    ['an array', '[1,2,3]'],
    ['text after the object', `${JSON.stringify(deltaEvent)}x`],
    ['a second object', `${JSON.stringify(deltaEvent)}{}`],
    ['a trailing comma', `${JSON.stringify(deltaEvent).slice(0, -1)},}`],
    ['a truncated frame', JSON.stringify(deltaEvent).slice(0, -3)],
    [
      'a number with a leading zero',
      JSON.stringify(deltaEvent).replace('"output_index":0', '"output_index":01'),
    ],
    [
      'a number with a plus sign',
      JSON.stringify(deltaEvent).replace('"output_index":0', '"output_index":+1'),
    ],
    ['an empty object', '{}'],
    ['nothing', ''],
  ])('should leave %s to the full parse', (_name, text) => {
    expect(new AudioDeltaReader().read(frame(text))).toBeUndefined();
  });
});

describe('when frames are generated around a valid delta', () => {
  const base = frame(
    JSON.stringify({ ...deltaEvent, delta: Buffer.from('hello audio!').toString('base64') }),
  );
  const alphabet = Buffer.from('{}[]":,\\ \n\t0123456789-+.eEAQ=/_ab\u0001', 'latin1');

  it('should never read a frame differently from the full parse (mutated bytes)', () => {
    const next = random(1);
    const reader = new AudioDeltaReader();
    let accepted = 0;
    for (let n = 0; n < 20_000; n++) {
      const bytes = Buffer.from(base);
      const edits = 1 + Math.floor(next() * 3);
      for (let e = 0; e < edits; e++)
        bytes[Math.floor(next() * bytes.length)] =
          alphabet[Math.floor(next() * alphabet.length)] ?? 0;
      const read = reader.read(bytes);
      if (read === undefined) continue;
      accepted++;
      expect(read, bytes.toString('latin1')).toEqual(fullParse(bytes));
    }
    // Edits that land in unread fields (event_id, indexes) still leave plain deltas.
    expect(accepted).toBeGreaterThan(0);
  });

  it('should never read a frame differently from the full parse (cut, doubled and inserted bytes)', () => {
    const next = random(2);
    const reader = new AudioDeltaReader();
    for (let n = 0; n < 20_000; n++) {
      const at = Math.floor(next() * base.length);
      const insert = Buffer.from([alphabet[Math.floor(next() * alphabet.length)] ?? 0]);
      const kind = Math.floor(next() * 3);
      const bytes =
        kind === 0
          ? base.subarray(0, at)
          : kind === 1
            ? Buffer.concat([base.subarray(0, at), base.subarray(at - 1)])
            : Buffer.concat([base.subarray(0, at), insert, base.subarray(at)]);
      const read = reader.read(bytes);
      if (read !== undefined) expect(read, bytes.toString('latin1')).toEqual(fullParse(bytes));
    }
  });

  it('should read every valid delta with shuffled keys and random whitespace', () => {
    const next = random(3);
    const reader = new AudioDeltaReader();
    const space = (): string => [' ', '\n', '\t', '\r', ''][Math.floor(next() * 5)] ?? '';
    for (let n = 0; n < 2_000; n++) {
      const payload = Buffer.from(
        Array.from({ length: Math.floor(next() * 40) }, () => Math.floor(next() * 256)),
      );
      const entries: [string, string | number][] = [
        ['type', 'response.output_audio.delta'],
        ['event_id', `event_${n}`],
        ['response_id', `resp_${n % 7}`],
        ['item_id', `item_${n % 5}`],
        ['output_index', Math.floor(next() * 3)],
        ['content_index', -0.5e-2],
        ['delta', payload.toString('base64')],
      ];
      entries.sort(() => next() - 0.5);
      const text = `${space()}{${entries.map(([key, value]) => `${space()}${JSON.stringify(key)}${space()}:${space()}${JSON.stringify(value)}${space()}`).join(',')}}${space()}`;
      const read = reader.read(frame(text));
      expect(read, text).toEqual(fullParse(frame(text)));
      expect(read?.audio).toEqual(payload);
    }
  });
});
