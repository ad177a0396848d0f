import { describe, expect, it } from 'vitest';
import { Playout } from '../../../gateway/media/playout.ts';

function frames(count: number, fill = 0x11): Buffer[] {
  return Array.from({ length: count }, (_, i) => Buffer.alloc(160, (fill + i) & 0xff));
}

describe('when playing model items', () => {
  it('should send the frames of each item in order with the marker on the first frame of each talk spurt', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(2));
    playout.end('item_a');
    const sent = [playout.next(), playout.next(), playout.next()];
    playout.enqueue('item_b', frames(2, 0x40));
    sent.push(playout.next(), playout.next());
    expect(
      sent.map((f) =>
        f.kind === 'audio' ? `${f.itemId}${f.marker ? '*' : ''}${f.itemDone ? '.' : ''}` : f.kind,
      ),
    ).toEqual(['item_a*', 'item_a.', 'idle', 'item_b*', 'item_b']);
  });

  it('should send comfort silence between spurts when configured, and nothing otherwise', () => {
    const silence = Buffer.alloc(160, 0xff);
    const withSilence = new Playout({ comfortSilence: silence });
    expect(withSilence.next()).toEqual({ kind: 'silence', payload: silence });
    expect(new Playout().next()).toEqual({ kind: 'idle' });
  });

  it('should count an underrun and mark the restart when an unfinished item runs dry', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(1));
    const first = playout.next();
    const dry = playout.next();
    playout.enqueue('item_a', frames(1));
    const resumed = playout.next();
    expect([first.kind, dry.kind, resumed.kind === 'audio' && resumed.marker]).toEqual([
      'audio',
      'idle',
      true,
    ]);
    expect(playout.stats().underruns).toBe(1);
  });
});

describe('when the caller barges in', () => {
  it('should drop everything queued at once and report the milliseconds of the current item sent', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(50));
    playout.enqueue('item_b', frames(10));
    for (let i = 0; i < 37; i++) playout.next();
    expect(playout.clear()).toEqual({ itemId: 'item_a', sentMs: 740, droppedMs: 13 * 20 + 200 });
    expect(playout.next()).toEqual({ kind: 'idle' });
    expect(playout.queuedMs()).toBe(0);
    expect(playout.clear()).toBeNull();
  });

  it('should report the item being played, not the one finished before it', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(3));
    playout.end('item_a');
    playout.enqueue('item_b', frames(5));
    for (let i = 0; i < 5; i++) playout.next();
    expect(playout.clear()).toMatchObject({ itemId: 'item_b', sentMs: 40 });
  });

  it('should count the real length of a partial last frame', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(3), 5);
    for (let i = 0; i < 3; i++) playout.next();
    // The item was not ended, so it is still current: 20 + 20 + 5 ms went out.
    expect(playout.clear()).toMatchObject({ itemId: 'item_a', sentMs: 45, droppedMs: 0 });
  });

  it('should report zero sent for an item queued but not started', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(4));
    expect(playout.clear()).toEqual({ itemId: 'item_a', sentMs: 0, droppedMs: 80 });
  });

  it('should say an item is done at once when it is ended after its last frame went out', () => {
    const playout = new Playout();
    playout.enqueue('item_a', frames(1));
    playout.next();
    expect(playout.end('item_a')).toBe(20);
    expect(playout.playing).toBe(false);
  });
});
