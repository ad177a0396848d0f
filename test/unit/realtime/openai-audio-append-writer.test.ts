import { describe, expect, it } from 'vitest';
import {
  AudioAppendWriter,
  appendEventLength,
} from '../../../gateway/realtime/openai-audio-append-writer.ts';

function bytesOf(length: number, seed: number): Buffer {
  return Buffer.from(
    Array.from({ length }, (_, i) => (i * 151 + seed * 31 + ((i * i) >> 3)) & 0xff),
  );
}

/** The event as the generic send path writes it: the wire text the provider must receive. */
function expectedEvent(audio: Buffer): string {
  return JSON.stringify({ type: 'input_audio_buffer.append', audio: audio.toString('base64') });
}

describe('when caller audio is written as an append event', () => {
  it.each([0, 1, 2, 3, 159, 160, 161, 320, 960])(
    'should write what JSON.stringify gives for %i bytes of audio',
    (length) => {
      const audio = bytesOf(length, length);
      const event = new AudioAppendWriter().write(audio);
      expect(event.toString('latin1')).toBe(expectedEvent(audio));
      expect(event.length).toBe(appendEventLength(length));
    },
  );

  it('should reuse its buffer for the next frame of the same length, with only that frame in it', () => {
    const writer = new AudioAppendWriter();
    const first = writer.write(bytesOf(160, 1));
    const second = writer.write(bytesOf(160, 2));
    expect(second).toBe(first);
    expect(second.toString('latin1')).toBe(expectedEvent(bytesOf(160, 2)));
  });

  it('should write frames of changing lengths, each complete', () => {
    const writer = new AudioAppendWriter();
    for (const [length, seed] of [
      [160, 1],
      [320, 2],
      [161, 3],
      [160, 4],
      [0, 5],
      [160, 6],
    ] as const) {
      const audio = bytesOf(length, seed);
      expect(writer.write(audio).toString('latin1')).toBe(expectedEvent(audio));
    }
  });

  it('should leave a released buffer as it was and write the next frame into a new one', () => {
    const writer = new AudioAppendWriter();
    const held = writer.write(bytesOf(160, 1));
    writer.release();
    const next = writer.write(bytesOf(160, 2));
    expect(next).not.toBe(held);
    expect(held.toString('latin1')).toBe(expectedEvent(bytesOf(160, 1)));
    expect(next.toString('latin1')).toBe(expectedEvent(bytesOf(160, 2)));
  });
});
