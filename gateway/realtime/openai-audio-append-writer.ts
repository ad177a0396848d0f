/**
 * Writes the `input_audio_buffer.append` event for a frame of caller audio straight into bytes.
 * Base64 needs no JSON escaping, so the event is its fixed prefix, the audio encoded in place and
 * its fixed suffix: no object, no JSON, no string.
 *
 * The buffer is kept for the next frame. A call sends 50 frames a second, all of one length, so
 * the next event only re-encodes the audio between the prefix and the suffix already written, and
 * at hundreds of calls no Buffer per frame is left to the scavenger. Whoever sends the bytes must
 * call `release()` when they may still be referenced after the send (queued behind a full
 * socket): the next frame then gets a buffer of its own.
 */
import { base64Length, encodeBase64Into } from './base64-bytes.ts';

/** The event around its base64 audio, as bytes. */
const APPEND_PREFIX = Buffer.from('{"type":"input_audio_buffer.append","audio":"', 'latin1');
const APPEND_SUFFIX = Buffer.from('"}', 'latin1');

/** The length of the append event for `audioBytes` bytes of audio. */
export function appendEventLength(audioBytes: number): number {
  return APPEND_PREFIX.length + base64Length(audioBytes) + APPEND_SUFFIX.length;
}

/** One writer per session: its buffer is reused only for that session's sends. */
export class AudioAppendWriter {
  private frame: Buffer | undefined;

  /** The append event for `audio`; the buffer is valid until the next call. */
  write(audio: Uint8Array): Buffer {
    let frame = this.frame;
    if (frame === undefined || frame.length !== appendEventLength(audio.length)) {
      frame = Buffer.allocUnsafe(appendEventLength(audio.length));
      frame.set(APPEND_PREFIX, 0);
      frame.set(APPEND_SUFFIX, frame.length - APPEND_SUFFIX.length);
      this.frame = frame;
    }
    encodeBase64Into(audio, frame, APPEND_PREFIX.length);
    return frame;
  }

  /** The last event's bytes may still be read by someone else: the next write uses a new buffer. */
  release(): void {
    this.frame = undefined;
  }
}
