/**
 * A model that streams without end (a broken or hostile server) must not grow a call's memory
 * without bound: playout takes at most MAX_QUEUED_MS of model audio and refuses the rest, counted.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_QUEUED_MS } from '../../../gateway/media/rtp-session.ts';
import { RtpSessionHarness } from './rtp-session-harness.ts';

const harness = new RtpSessionHarness(6);
afterEach(() => harness.closeAll());

describe('when the model streams ten seconds more audio than playout holds', () => {
  it('should queue exactly MAX_QUEUED_MS of it, refuse the rest and count what it refused', async () => {
    const { session } = await harness.start();
    const second = 8000;
    const seconds = MAX_QUEUED_MS / 1000 + 10;
    for (let i = 0; i < seconds; i++) session.play('endless', Buffer.alloc(second, 0x55));
    expect(session.stats().modelAudioRefusedMs).toBe(10_000);
    const cleared = session.clear();
    expect((cleared?.sentMs ?? 0) + (cleared?.droppedMs ?? 0)).toBe(MAX_QUEUED_MS);
    // Room again once the queue is cleared.
    session.play('next', Buffer.alloc(second, 0x55));
    expect(session.stats().modelAudioRefusedMs).toBe(10_000);
    expect(session.clear()?.droppedMs).toBe(1000);
  });
});
