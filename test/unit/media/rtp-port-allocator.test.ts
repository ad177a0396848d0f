/**
 * RTP ports per call: even, with RTCP above inside the range, never handed out twice while held,
 * and drawn at random so that one call's port says nothing about the next one's.
 */
import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { randomInt, seededRandom } from './seeded-random.ts';

function exhaustedError(ports: RtpPortAllocator): unknown {
  try {
    ports.allocate();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('when allocating RTP ports', () => {
  it('should hand out even ports with their odd RTCP port in range, and refuse when exhausted', () => {
    const ports = new RtpPortAllocator({ portMin: 30000, portMax: 30005 });
    const held = [ports.allocate(), ports.allocate(), ports.allocate()];
    expect([...held].sort()).toEqual([30000, 30002, 30004]);
    const error = exhaustedError(ports);
    expect(isCallgateError(error, 'CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED') && error.sipStatus).toBe(
      503,
    );
    ports.release(held[1] as number);
    expect(ports.allocate()).toBe(held[1]);
    expect(ports.inUse).toBe(3);
  });

  it('should never hand out a port twice while it is held, over many calls coming and going', () => {
    const random = seededRandom(21);
    const ports = new RtpPortAllocator({
      portMin: 31001,
      portMax: 31100,
      random: (n) => randomInt(random, n),
    });
    expect(ports.capacity).toBe(49);
    const held = new Set<number>();
    for (let step = 0; step < 5_000; step++) {
      if (held.size === ports.capacity || (held.size > 0 && random() < 0.45)) {
        const port = [...held][randomInt(random, held.size)] as number;
        held.delete(port);
        ports.release(port);
        continue;
      }
      const port = ports.allocate();
      expect(held.has(port)).toBe(false);
      expect(port % 2).toBe(0);
      expect(port).toBeGreaterThanOrEqual(31002);
      expect(port + 1).toBeLessThanOrEqual(31100);
      held.add(port);
      expect(ports.inUse).toBe(held.size);
    }
  });

  it('should not reuse a just-released port while others are free', () => {
    const ports = new RtpPortAllocator({ portMin: 30000, portMax: 30009 });
    const first = ports.allocate();
    ports.release(first);
    for (let i = 0; i < 4; i++) expect(ports.allocate()).not.toBe(first);
  });

  it('should keep the RTCP port inside an odd upper bound', () => {
    const ports = new RtpPortAllocator({ portMin: 30000, portMax: 30002 });
    expect(ports.capacity).toBe(1);
  });

  it('should ignore a port released twice, so it is never handed out to two calls', () => {
    const ports = new RtpPortAllocator({ portMin: 30000, portMax: 30003 });
    const a = ports.allocate();
    ports.release(a);
    ports.release(a);
    const b = ports.allocate();
    const c = ports.allocate();
    expect(b).not.toBe(c);
    expect(exhaustedError(ports)).toBeDefined();
  });
});

describe('when ports are drawn from a fresh range', () => {
  it("should not follow from the previous call's port: successive ports spread like random draws", () => {
    // 2,000 draws from 500 slots (crypto.randomInt, as in production), each released at once.
    const ports = new RtpPortAllocator({ portMin: 20000, portMax: 20999 });
    const slots = ports.capacity;
    const draws = 2_000;
    const seen: number[] = [];
    for (let i = 0; i < draws; i++) {
      const port = ports.allocate();
      seen.push(port);
      ports.release(port);
    }
    // Round-robin would step by 2 every time; random draws land next to the last port rarely
    // (about 2/500 of the time): allow up to 2 %, which fails a predictable allocator at once.
    let adjacent = 0;
    for (let i = 1; i < draws; i++)
      if (Math.abs((seen[i] as number) - (seen[i - 1] as number)) === 2) adjacent++;
    expect(adjacent).toBeLessThan(draws * 0.02);
    // Spread over the range: chi-square over 10 equal bins, 9 degrees of freedom; 27.9 is the
    // 0.1 % critical value, so this fails by chance about once in a thousand runs at most.
    const bins = new Array<number>(10).fill(0);
    for (const port of seen) bins[Math.floor(((port - 20000) / 2 / slots) * 10)]! += 1;
    const expected = draws / 10;
    const chiSquare = bins.reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    expect(chiSquare).toBeLessThan(27.9);
  });
});
