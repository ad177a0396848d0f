import { describe, expect, it } from 'vitest';
import { PayloadArena } from '../../../gateway/media/payload-arena.ts';
import { PayloadStore } from '../../../gateway/media/payload-store.ts';
import { seededRandom } from './seeded-random.ts';

describe('when a jitter buffer keeps payload bytes in its store', () => {
  it('should give back every payload byte for byte, whatever the order of puts and releases, sizes and growth', () => {
    const random = seededRandom(6);
    const store = new PayloadStore(3);
    const held = new Map<number, Buffer>();
    for (let step = 0; step < 5000; step++) {
      if (held.size > 0 && random() < 0.45) {
        const slots = [...held.keys()];
        const slot = slots[Math.floor(random() * slots.length)] as number;
        const expected = held.get(slot) as Buffer;
        expect(store.view(slot, expected.length).equals(expected)).toBe(true);
        store.release(slot);
        held.delete(slot);
        continue;
      }
      // Mostly G.711 frames, now and then an Opus-sized or a 30 ms one, which widen the slots.
      const length = random() < 0.9 ? 160 : 1 + Math.floor(random() * 1400);
      const payload = Buffer.from(Array.from({ length }, () => Math.floor(random() * 256)));
      const slot = store.put(payload);
      expect(held.has(slot)).toBe(false);
      held.set(slot, Buffer.from(payload));
      // The caller's buffer may be reused at once: the store holds its own copy.
      payload.fill(0);
    }
    for (const [slot, expected] of held)
      expect(store.view(slot, expected.length).equals(expected)).toBe(true);
  });

  it('should hand out each slot once until it is released or the store is cleared', () => {
    const store = new PayloadStore(2);
    const slots = [
      store.put(Buffer.alloc(160, 1)),
      store.put(Buffer.alloc(160, 2)),
      store.put(Buffer.alloc(160, 3)),
    ];
    expect(new Set(slots).size).toBe(3);
    store.clear();
    const again = [store.put(Buffer.alloc(10, 4)), store.put(Buffer.alloc(10, 5))];
    expect(new Set(again).size).toBe(2);
    expect(store.view(again[0] as number, 10).equals(Buffer.alloc(10, 4))).toBe(true);
  });

  it('should never change the bytes of a view handed out, whatever this or another store puts, releases or clears after it', () => {
    const random = seededRandom(7);
    const arena = new PayloadArena();
    const store = new PayloadStore(4, arena);
    // Another call's jitter buffer writing into the same chunks.
    const other = new PayloadStore(4, arena);
    const handedOut: Array<{ view: Buffer; expected: Buffer }> = [];
    const held: Array<{ slot: number; payload: Buffer }> = [];
    for (let step = 0; step < 3000; step++) {
      if (held.length > 0 && random() < 0.5) {
        const { slot, payload } = held.splice(Math.floor(random() * held.length), 1)[0] as {
          slot: number;
          payload: Buffer;
        };
        handedOut.push({ view: store.view(slot, payload.length), expected: payload });
        store.release(slot);
      } else if (random() < 0.01) {
        store.clear();
        held.length = 0;
      } else {
        const payload = Buffer.from(
          Array.from({ length: random() < 0.9 ? 160 : 1 + Math.floor(random() * 1400) }, () =>
            Math.floor(random() * 256),
          ),
        );
        held.push({ slot: store.put(payload), payload });
        other.release(other.put(Buffer.alloc(160, step & 0xff)));
      }
    }
    expect(handedOut.length).toBeGreaterThan(1000);
    for (const { view, expected } of handedOut) expect(view.equals(expected)).toBe(true);
  });
});
