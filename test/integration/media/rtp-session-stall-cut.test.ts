/**
 * A process stalled for seconds (SIGSTOP, a starved VM) with agent audio queued: after a stall of
 * rtp.stallCutMs the rest is dropped before any of it goes out, and the call is told what was
 * sent; a shorter stall only delays the audio. Real UDP; the stall is a busy event loop.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RtpSessionHarness } from './rtp-session-harness.ts';

const harness = new RtpSessionHarness(7);
afterEach(() => harness.closeAll());

const ITEM_MS = 3_000;

function stall(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // The event loop does nothing else, as in a paused process.
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('when the process stalls while the agent speaks', () => {
  it('should drop the rest of the speech after a stall past stallCutMs and say what was sent', async () => {
    const { session, peer, events } = await harness.start({}, { stallCutMs: 1_000 });
    session.play('item-1', Buffer.alloc((ITEM_MS / 1000) * 8000, 0x55));
    session.endItem('item-1');
    await sleep(500);
    const beforeStall = peer.packets().length;
    stall(1_500);
    await sleep(ITEM_MS);

    const stalled = events.find((e) => e.type === 'playout-stalled');
    expect(stalled).toMatchObject({ type: 'playout-stalled', cleared: { itemId: 'item-1' } });
    if (stalled?.type !== 'playout-stalled') throw new Error('no playout-stalled event');
    expect(stalled.gapMs).toBeGreaterThanOrEqual(1_000);
    expect(stalled.cleared.sentMs).toBeGreaterThanOrEqual(beforeStall * 20 - 40);
    expect(stalled.cleared.sentMs + stalled.cleared.droppedMs).toBe(ITEM_MS);
    // Nothing of the item went out after the stall, and it never finished playing.
    expect(peer.packets().length * 20).toBeLessThanOrEqual(stalled.cleared.sentMs + 60);
    expect(events.some((e) => e.type === 'item-played')).toBe(false);
  });

  it('should only delay the speech after a shorter stall', async () => {
    const { session, peer, events } = await harness.start({}, { stallCutMs: 1_000 });
    session.play('item-2', Buffer.alloc((ITEM_MS / 1000) * 8000, 0x55));
    session.endItem('item-2');
    await sleep(500);
    stall(400);
    await sleep(ITEM_MS);
    expect(events.some((e) => e.type === 'playout-stalled')).toBe(false);
    expect(events).toContainEqual({ type: 'item-played', itemId: 'item-2', sentMs: ITEM_MS });
    expect(peer.packets().length).toBeGreaterThan(0);
  });
});
