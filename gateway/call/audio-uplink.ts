/**
 * The caller's audio on its way to the model: 20 ms frames from the RTP session, sent in batches
 * (MODEL_AUDIO_BATCH_MS). Anything that must follow the audio the caller sent before it (a key
 * press) flushes the batch first (test/e2e/call-model-audio-batches.test.ts).
 */

/**
 * Caller audio goes to the model in batches of this many milliseconds rather than as 20 ms
 * frames: a third of the WebSocket messages (each a JSON event, base64 and a masked frame, and the
 * same again to read on the model's side), for at most 40 ms more before the model hears the
 * caller. Far below the server VAD's prefix padding (300 ms) and silence duration (500 ms), so
 * turn detection and barge-in are unchanged; a key press flushes the batch first, keeping order.
 */
export const MODEL_AUDIO_BATCH_MS = 60;
const FRAME_MS = 20;

export class AudioUplink {
  /** Caller frames not yet sent to the model. */
  private readonly batch: Buffer[] = [];

  /** `send` hands audio to the model session serving the call now (dropped when there is none). */
  constructor(private readonly send: (audio: Buffer) => void) {}

  /** One 20 ms frame from the caller; a full batch goes to the model. */
  push(frame: Buffer): void {
    this.batch.push(frame);
    if (this.batch.length * FRAME_MS >= MODEL_AUDIO_BATCH_MS) this.flush();
  }

  /** Sends what is batched now. */
  flush(): void {
    if (this.batch.length === 0) return;
    const audio = this.batch.length === 1 ? this.batch[0] : Buffer.concat(this.batch);
    this.batch.length = 0;
    if (audio !== undefined) this.send(audio);
  }
}
