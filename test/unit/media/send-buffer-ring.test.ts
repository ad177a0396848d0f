import { describe, expect, it } from 'vitest';
import { SendBufferRing } from '../../../gateway/media/send-buffer-ring.ts';

describe('when outgoing packets are built in a ring of reused buffers', () => {
  it('should hand back a buffer sent before once the socket has nothing queued', () => {
    const ring = new SendBufferRing(() => 0, 4);
    const first = Array.from({ length: 4 }, () => ring.take(172));
    const second = Array.from({ length: 4 }, () => ring.take(172));
    expect(second).toEqual(first);
    second.forEach((buffer, i) => expect(buffer).toBe(first[i]));
  });

  it('should never hand out one of the last size - 1 buffers, which may still be waiting for their flush', () => {
    const ring = new SendBufferRing(() => 0, 4);
    const taken: Buffer[] = [];
    for (let i = 0; i < 40; i++) {
      const buffer = ring.take(172);
      for (const recent of taken.slice(-3)) expect(buffer).not.toBe(recent);
      taken.push(buffer);
    }
  });

  it('should never write again a buffer taken before a send was queued', () => {
    let queued = 0;
    const ring = new SendBufferRing(() => queued, 4);
    const before = Array.from({ length: 4 }, () => ring.take(172));
    // The socket would block: one of those buffers is queued in Node, any of them may be.
    queued = 1;
    const after = Array.from({ length: 12 }, () => ring.take(172));
    for (const buffer of after)
      for (const old of before)
        expect(buffer.buffer === old.buffer && buffer.byteOffset === old.byteOffset).toBe(false);
    // Once the queue is empty again, the ring reuses its own (new) buffers, still none of the old ones.
    queued = 0;
    const later = Array.from({ length: 8 }, () => ring.take(172));
    for (const buffer of later) expect(before).not.toContain(buffer);
  });

  it('should give a buffer of the length asked for when packet sizes change', () => {
    const ring = new SendBufferRing(() => 0, 2);
    expect(ring.take(172).length).toBe(172);
    expect(ring.take(40).length).toBe(40);
    expect(ring.take(1200).length).toBe(1200);
    expect(ring.take(40).length).toBe(40);
  });
});
