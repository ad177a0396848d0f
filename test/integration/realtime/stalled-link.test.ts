import { afterEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startHarness, waitFor, type Harness } from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** 20 ms of 24 kHz PCM, each frame's bytes different from its neighbours'. */
function frame(index: number): Buffer {
  return Buffer.from(
    Array.from({ length: 960 }, (_, i) => (index * 7 + i * 13 + (index >> 8)) & 0xff),
  );
}

describe('when the link stalls while caller audio is sent', () => {
  it('should deliver every frame intact and in order once it flows again, with none dropped below the send buffer limit', async () => {
    // The client writes each frame's event into the buffer of the previous one: frames queued
    // behind a stalled socket must not be overwritten by later ones.
    harness = await startHarness({ client: { maxSendBufferBytes: 64 * 1024 * 1024 } });
    const { client, connection } = harness;
    connection.pauseReading();
    // About 10 MB on the wire: more than loopback's socket buffers hold, so the sends back up.
    const frames = 8_000;
    const sent = createHash('sha256');
    for (let i = 0; i < frames; i++) {
      const audio = frame(i);
      sent.update(audio);
      client.sendAudio(audio);
    }
    connection.resumeReading();
    await waitFor(
      `${frames} appends`,
      () =>
        connection.session.receivedTypes().filter((type) => type === 'input_audio_buffer.append')
          .length === frames,
      20_000,
    );
    expect(client.droppedAudioFrames).toBe(0);
    expect(connection.session.inputAudioDigest()).toBe(sent.digest('hex'));
  });
});
