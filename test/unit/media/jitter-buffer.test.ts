import { describe, expect, it } from 'vitest';
import { concealG711Frame } from '../../../gateway/media/g711-concealment.ts';
import { ulawToLinear } from '../../../gateway/media/g711.ts';
import { JitterBuffer, type JitterFrame } from '../../../gateway/media/jitter-buffer.ts';
import { seededRandom } from './seeded-random.ts';

const FRAME = 20;

function packet(sequenceNumber: number) {
  const payload = Buffer.alloc(160, 0x80 | (sequenceNumber & 0x3f));
  return { sequenceNumber: sequenceNumber & 0xffff, timestamp: (sequenceNumber * 160) >>> 0, payload };
}

function buffer(minDepthMs = 20, maxDepthMs = 200, withConcealment = true): JitterBuffer {
  return new JitterBuffer({ minDepthMs, maxDepthMs, clockRate: 8000, ...(withConcealment ? { conceal: (p: Buffer) => concealG711Frame(p, 'PCMU') } : {}) });
}

function describeFrame(frame: JitterFrame): string {
  return frame.kind === 'frame' ? `#${frame.sequenceNumber}` : frame.kind;
}

/**
 * Scripted arrivals: sequence number -> arrival time (ms). The clock ticks every 20 ms; at each
 * tick the packets that arrived by then are pushed, then one frame is popped.
 */
function play(jb: JitterBuffer, arrivals: Array<[number, number]>, ticks: number): string[] {
  const ordered = [...arrivals].sort((a, b) => a[1] - b[1]);
  const out: string[] = [];
  let i = 0;
  for (let tick = 0; tick < ticks; tick++) {
    const now = tick * FRAME;
    while (i < ordered.length && (ordered[i] as [number, number])[1] <= now) {
      const [seq, at] = ordered[i] as [number, number];
      jb.push(packet(seq), at);
      i++;
    }
    out.push(describeFrame(jb.pop()));
  }
  return out;
}

describe('when packets arrive in order', () => {
  it('should play each one once, in order, after one frame of buffering', () => {
    const out = play(buffer(), Array.from({ length: 5 }, (_, n) => [100 + n, n * FRAME] as [number, number]), 6);
    expect(out).toEqual(['#100', '#101', '#102', '#103', '#104', 'underrun']);
  });

  it('should follow sequence numbers across the 16-bit wrap', () => {
    const out = play(buffer(), [65534, 65535, 65536, 65537].map((s, n) => [s, n * FRAME] as [number, number]), 4);
    expect(out).toEqual(['#65534', '#65535', '#0', '#1']);
  });
});

describe('when packets are reordered', () => {
  it('should play them in sequence order', () => {
    const jb = buffer(40);
    for (const seq of [1, 3, 2, 5, 4]) jb.push(packet(seq), 0);
    expect(Array.from({ length: 5 }, () => describeFrame(jb.pop()))).toEqual(['#1', '#2', '#3', '#4', '#5']);
  });

  it('should accept a packet older than the first one while still buffering', () => {
    const jb = buffer(60);
    jb.push(packet(11), 0);
    jb.push(packet(10), 5);
    jb.push(packet(12), 10);
    expect([jb.pop(), jb.pop(), jb.pop()].map(describeFrame)).toEqual(['#10', '#11', '#12']);
  });
});

describe('when packets are duplicated or late', () => {
  it('should drop a duplicate still in the buffer and one already played', () => {
    const jb = buffer(40);
    expect(jb.push(packet(1), 0)).toBe('buffered');
    expect(jb.push(packet(1), 1)).toBe('duplicate');
    jb.push(packet(2), 2);
    expect(describeFrame(jb.pop())).toBe('#1');
    expect(jb.push(packet(1), 30)).toBe('duplicate');
    expect(describeFrame(jb.pop())).toBe('#2');
    expect(jb.stats().duplicates).toBe(2);
  });

  it('should drop a packet that arrives after its slot was concealed', () => {
    const jb = buffer();
    jb.push(packet(1), 0);
    expect(describeFrame(jb.pop())).toBe('#1');
    jb.push(packet(3), 20);
    jb.push(packet(4), 20);
    expect(describeFrame(jb.pop())).toBe('concealed');
    expect(jb.push(packet(2), 30)).toBe('late');
    expect([jb.pop(), jb.pop()].map(describeFrame)).toEqual(['#3', '#4']);
    expect(jb.stats()).toMatchObject({ late: 1, lost: 1, played: 3 });
  });
});

describe('when packets are lost', () => {
  it('should conceal a single lost G.711 frame with an attenuated copy of the previous one', () => {
    const jb = buffer(40);
    for (const seq of [1, 2, 4, 5]) jb.push(packet(seq), 0);
    const frames = [jb.pop(), jb.pop(), jb.pop(), jb.pop()];
    expect(frames.map(describeFrame)).toEqual(['#1', '#2', 'concealed', '#4']);
    const concealed = frames[2];
    if (concealed?.kind !== 'concealed') return;
    const previous = ulawToLinear(packet(2).payload[80] as number);
    expect(Math.abs(ulawToLinear(concealed.payload[80] as number))).toBeLessThan(Math.abs(previous));
    expect(Math.abs(ulawToLinear(concealed.payload[80] as number))).toBeGreaterThan(Math.abs(previous) / 4);
    expect(jb.stats()).toMatchObject({ lost: 1, concealed: 1, played: 3 });
  });

  it('should conceal only the first of two consecutive lost frames', () => {
    const jb = buffer(40);
    for (const seq of [1, 4, 5]) jb.push(packet(seq), 0);
    expect([jb.pop(), jb.pop(), jb.pop(), jb.pop()].map(describeFrame)).toEqual(['#1', 'concealed', 'lost', '#4']);
  });

  it('should leave the gap silent for a codec without concealment', () => {
    const jb = buffer(40, 200, false);
    for (const seq of [1, 3]) jb.push(packet(seq), 0);
    expect([jb.pop(), jb.pop(), jb.pop()].map(describeFrame)).toEqual(['#1', 'lost', '#3']);
  });
});

describe('when the network jitters', () => {
  it('should deepen the buffer within bounds under jitter and stay at the minimum without it', () => {
    const steady = buffer(20, 200);
    play(steady, Array.from({ length: 200 }, (_, n) => [n, n * FRAME] as [number, number]), 200);
    expect(steady.stats().targetDepthMs).toBe(20);
    expect(steady.stats().jitterMs).toBeLessThan(1);

    const random = seededRandom(3);
    const jittery = buffer(20, 200);
    const out = play(jittery, Array.from({ length: 500 }, (_, n) => [n, n * FRAME + Math.floor(random() * 60)] as [number, number]), 520);
    const stats = jittery.stats();
    expect(stats.jitterMs).toBeGreaterThan(10);
    expect(stats.targetDepthMs).toBeGreaterThanOrEqual(60);
    expect(stats.targetDepthMs).toBeLessThanOrEqual(200);
    // Once adapted, most frames play: a deep enough buffer rides out the jitter.
    const lastHalf = out.slice(260, 500);
    expect(lastHalf.filter((f) => f.startsWith('#')).length).toBeGreaterThan(lastHalf.length * 0.9);
  });

  it('should never exceed the maximum depth when packets flood in', () => {
    const jb = buffer(20, 100);
    for (let seq = 0; seq < 60; seq++) jb.push(packet(seq), 0);
    expect(jb.depthFrames()).toBeLessThanOrEqual(100 / FRAME + 2);
    expect(jb.stats().discarded).toBeGreaterThan(40);
  });

  it('should deepen after an underrun', () => {
    const jb = buffer(20, 200);
    const before = jb.stats().targetDepthMs;
    play(jb, [[1, 0], [2, 20], [3, 100], [4, 120], [5, 140]], 8);
    expect(jb.stats().underruns).toBeGreaterThanOrEqual(1);
    expect(jb.stats().targetDepthMs).toBeGreaterThan(before);
  });
});

describe('when a talk spurt ends below the target depth', () => {
  it('should play the last frames once they have waited the target depth instead of holding them', () => {
    const jb = buffer(60, 200);
    jb.push(packet(1), 0);
    jb.push(packet(2), 20);
    // Without a clock the buffer waits for a third frame that never comes.
    expect(describeFrame(jb.pop())).toBe('buffering');
    expect(describeFrame(jb.pop(40))).toBe('buffering');
    expect([jb.pop(60), jb.pop(80), jb.pop(100)].map(describeFrame)).toEqual(['#1', '#2', 'underrun']);
  });
});

describe('when the sequence numbering jumps', () => {
  it('should drop one stray packet far from the stream and keep playing', () => {
    const jb = buffer(20);
    jb.push(packet(10), 0);
    expect(describeFrame(jb.pop())).toBe('#10');
    expect(jb.push(packet(30_000), 10)).toBe('jump-pending');
    jb.push(packet(11), 20);
    expect(describeFrame(jb.pop())).toBe('#11');
  });

  it('should follow a new numbering confirmed by two consecutive packets', () => {
    const jb = buffer(20);
    jb.push(packet(10), 0);
    jb.pop();
    expect(jb.push(packet(40_000), 20)).toBe('jump-pending');
    expect(jb.push(packet(40_001), 40)).toBe('resynced');
    expect([jb.pop(), jb.pop()].map(describeFrame)).toEqual(['#40000', '#40001']);
    expect(jb.stats().resyncs).toBe(1);
  });
});

describe('when the timestamps jump with the sequence numbers continuous', () => {
  it('should keep playing in order without inflating the jitter estimate', () => {
    const jb = buffer(20, 200);
    const out: string[] = [];
    for (let n = 0; n < 40; n++) {
      // A sender that restarts its timestamp clock halfway (a media server switch).
      const timestamp = n < 20 ? n * 160 : 4_000_000_000 + n * 160;
      jb.push({ sequenceNumber: 500 + n, timestamp: timestamp >>> 0, payload: Buffer.alloc(160, 1) }, n * FRAME);
      out.push(describeFrame(jb.pop()));
    }
    expect(out.filter((f) => f.startsWith('#'))).toHaveLength(40);
    expect(jb.stats().jitterMs).toBeLessThan(5);
  });
});

describe('when the datagram a packet came in is reused after push', () => {
  it('should play the bytes that were pushed, not what the datagram holds later', () => {
    const jb = new JitterBuffer({ minDepthMs: 20, maxDepthMs: 200, clockRate: 8000 });
    const datagram = Buffer.alloc(172, 0x11);
    jb.push({ sequenceNumber: 1, timestamp: 160, payload: datagram.subarray(12) }, 0);
    datagram.fill(0x22);
    jb.push({ sequenceNumber: 2, timestamp: 320, payload: datagram.subarray(12) }, 20);
    const first = jb.pop(20);
    const second = jb.pop(40);
    expect(first).toMatchObject({ kind: 'frame', sequenceNumber: 1 });
    expect(second).toMatchObject({ kind: 'frame', sequenceNumber: 2 });
    expect(first.kind === 'frame' && first.payload.equals(Buffer.alloc(160, 0x11))).toBe(true);
    expect(second.kind === 'frame' && second.payload.equals(Buffer.alloc(160, 0x22))).toBe(true);
  });
});

describe('when the buffer is deeper than its target', () => {
  /** Steady packets, then a stall: the next 6 arrive together (a process that was not scheduled). */
  function burstAfterStall(jb: JitterBuffer, ticks: number, surplus: boolean): string[] {
    const arrivals: Array<[number, number]> = [];
    for (let seq = 0; seq < ticks; seq++) arrivals.push([seq, seq >= 20 && seq < 26 ? 26 * FRAME : seq * FRAME]);
    const ordered = arrivals.sort((a, b) => a[1] - b[1]);
    const out: string[] = [];
    let i = 0;
    for (let tick = 0; tick < ticks; tick++) {
      const now = tick * FRAME;
      for (; i < ordered.length && (ordered[i] as [number, number])[1] <= now; i++) {
        const [seq, at] = ordered[i] as [number, number];
        jb.push(packet(seq), at);
      }
      out.push(describeFrame(jb.pop(now)));
      const extra = surplus ? jb.popSurplus() : undefined;
      if (extra !== undefined) out.push(describeFrame(extra));
    }
    return out;
  }

  it("should drop the oldest frame to shrink by default, as a real-time player must", () => {
    const jb = buffer(20, 200);
    const out = burstAfterStall(jb, 400, false);
    expect(jb.stats().discarded).toBeGreaterThan(0);
    expect(jb.stats().hurried).toBe(0);
    const played = out.filter((f) => f.startsWith('#')).map((f) => Number(f.slice(1)));
    // What was discarded never came out: gaps in the sequence.
    const missing = Array.from({ length: Math.max(...played) }, (_, n) => n).filter((n) => !played.includes(n));
    expect(missing).toHaveLength(jb.stats().discarded);
  });

  it("should hand the frames out early with shrink 'play', in order, and lose none", () => {
    const jb = new JitterBuffer({ minDepthMs: 20, maxDepthMs: 200, clockRate: 8000, shrink: 'play' });
    const out = burstAfterStall(jb, 400, true);
    const stats = jb.stats();
    expect(stats.discarded).toBe(0);
    expect(stats.hurried).toBeGreaterThan(0);
    const played = out.filter((f) => f.startsWith('#')).map((f) => Number(f.slice(1)));
    // Every frame the buffer held went out once, in sequence order; only the tail is still held.
    expect(played).toEqual(Array.from({ length: played.length }, (_, n) => n));
    expect(played.length + jb.depthFrames()).toBe(400);
    // The extra frames brought the depth back to its target.
    expect(jb.depthFrames()).toBeLessThanOrEqual(stats.targetDepthMs / FRAME + 2);
  });

  it('should offer no surplus while the buffer is at its target', () => {
    const jb = new JitterBuffer({ minDepthMs: 20, maxDepthMs: 200, clockRate: 8000, shrink: 'play' });
    for (let tick = 0; tick < 200; tick++) {
      jb.push(packet(tick), tick * FRAME);
      jb.pop(tick * FRAME);
      expect(jb.popSurplus()).toBeUndefined();
    }
    expect(jb.stats().hurried).toBe(0);
  });
});
