/**
 * Caller audio that arrives all at once, as it does after this process stalled (a GC pause, a busy
 * core: the kernel queued the packets) or after a network hiccup, over real UDP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RtpSessionHarness, audioEvents, audioPayload, stream } from './rtp-session-harness.ts';
import { sleep, waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(3);
afterEach(() => harness.closeAll());

describe('when more caller audio arrives at once than the jitter buffer may hold', () => {
  it('should give all of it to the model, in order, early rather than discard it', async () => {
    const { session, peer, events } = await harness.start({}, { jitterMaxMs: 100 });
    await stream(peer, session.localPort, 5, { ssrc: 7, firstSeq: 100, firstByte: 0 });
    // 600 ms of audio in one burst: six times the buffer's maximum depth.
    for (let i = 5; i < 35; i++)
      peer.send(
        {
          payloadType: 0,
          sequenceNumber: 100 + i,
          timestamp: (100 + i) * 160,
          ssrc: 7,
          payload: audioPayload(i),
        },
        session.localPort,
      );
    await sleep(20);
    await stream(peer, session.localPort, 5, { ssrc: 7, firstSeq: 135, firstByte: 35 });
    await waitFor(() => audioEvents(events).length >= 40);
    expect(audioEvents(events).map((b) => b[0])).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(session.stats()).toMatchObject({ discarded: 0, lost: 0, concealed: 0 });
    // What the burst brought was handed over at once, not held for 600 ms.
    expect(session.stats().jitterDepthMs).toBeLessThanOrEqual(100);
  });
});
