import { describe, expect, it } from 'vitest';
import { concealG711Frame } from '../../../gateway/media/g711-concealment.ts';
import { ulawToLinear } from '../../../gateway/media/g711.ts';
import { JitterBuffer, type JitterFrame } from '../../../gateway/media/jitter-buffer.ts';
import { seededRandom } from './seeded-random.ts';

const FRAME = 20;

function packet(sequenceNumber: number) {
  const payload = Buffer.alloc(160, 0x80 | (sequenceNumber & 0x3f));
  return {
    sequenceNumber: sequenceNumber & 0xffff,
    timestamp: (sequenceNumber * 160) >>> 0,
    payload,
  };
}

function buffer(minDepthMs = 20, maxDepthMs = 200, withConcealment = true): JitterBuffer {
  return new JitterBuffer({
    minDepthMs,
    maxDepthMs,
    clockRate: 8000,
    ...(withConcealment ? { conceal: (p: Buffer) => concealG711Frame(p, 'PCMU') } : {}),
  });
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
    const out = play(
      buffer(),
      Array.from({ length: 5 }, (_, n) => [100 + n, n * FRAME] as [number, number]),
      6,
    );
    expect(out).toEqual(['#100', '#101', '#102', '#103', '#104', 'underrun']);
  });

  it('should follow sequence numbers across the 16-bit wrap', () => {
    const out = play(
      buffer(),
      [65534, 65535, 65536, 65537].map((s, n) => [s, n * FRAME] as [number, number]),
      4,
    );
    expect(out).toEqual(['#65534', '#65535', '#0', '#1']);
  });
});

describe('when packets are reordered', () => {
  it('should play them in sequence order', () => {
    const jb = buffer(40);
    for (const seq of [1, 3, 2, 5, 4]) jb.push(packet(seq), 0);
    expect(Array.from({ length: 5 }, () => describeFrame(jb.pop()))).toEqual([
      '#1',
      '#2',
      '#3',
      '#4',
      '#5',
    ]);
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
    expect(Math.abs(ulawToLinear(concealed.payload[80] as number))).toBeLessThan(
      Math.abs(previous),
    );
    expect(Math.abs(ulawToLinear(concealed.payload[80] as number))).toBeGreaterThan(
      Math.abs(previous) / 4,
    );
    expect(jb.stats()).toMatchObject({ lost: 1, concealed: 1, played: 3 });
  });

  it('should conceal only the first of two consecutive lost frames', () => {
    const jb = buffer(40);
    for (const seq of [1, 4, 5]) jb.push(packet(seq), 0);
    expect([jb.pop(), jb.pop(), jb.pop(), jb.pop()].map(describeFrame)).toEqual([
      '#1',
      'concealed',
      'lost',
      '#4',
    ]);
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
    play(
      steady,
      Array.from({ length: 200 }, (_, n) => [n, n * FRAME] as [number, number]),
      200,
    );
    expect(steady.stats().targetDepthMs).toBe(20);
    expect(steady.stats().jitterMs).toBeLessThan(1);

    const random = seededRandom(3);
    const jittery = buffer(20, 200);
    const out = play(
      jittery,
      Array.from(
        { length: 500 },
        (_, n) => [n, n * FRAME + Math.floor(random() * 60)] as [number, number],
      ),
      520,
    );
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
    play(
      jb,
      [
        [1, 0],
        [2, 20],
        [3, 100],
        [4, 120],
        [5, 140],
      ],
      8,
    );
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
    expect([jb.pop(60), jb.pop(80), jb.pop(100)].map(describeFrame)).toEqual([
      '#1',
      '#2',
      'underrun',
    ]);
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
      jb.push(
        { sequenceNumber: 500 + n, timestamp: timestamp >>> 0, payload: Buffer.alloc(160, 1) },
        n * FRAME,
      );
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
    for (let seq = 0; seq < ticks; seq++)
      arrivals.push([seq, seq >= 20 && seq < 26 ? 26 * FRAME : seq * FRAME]);
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

  it('should drop the oldest frame to shrink by default, as a real-time player must', () => {
    const jb = buffer(20, 200);
    const out = burstAfterStall(jb, 400, false);
    expect(jb.stats().discarded).toBeGreaterThan(0);
    expect(jb.stats().hurried).toBe(0);
    const played = out.filter((f) => f.startsWith('#')).map((f) => Number(f.slice(1)));
    // What was discarded never came out: gaps in the sequence.
    const missing = Array.from({ length: Math.max(...played) }, (_, n) => n).filter(
      (n) => !played.includes(n),
    );
    expect(missing).toHaveLength(jb.stats().discarded);
  });

  it("should hand the frames out early with shrink 'play', in order, and lose none", () => {
    const jb = new JitterBuffer({
      minDepthMs: 20,
      maxDepthMs: 200,
      clockRate: 8000,
      shrink: 'play',
    });
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
    const jb = new JitterBuffer({
      minDepthMs: 20,
      maxDepthMs: 200,
      clockRate: 8000,
      shrink: 'play',
    });
    for (let tick = 0; tick < 200; tick++) {
      jb.push(packet(tick), tick * FRAME);
      jb.pop(tick * FRAME);
      expect(jb.popSurplus()).toBeUndefined();
    }
    expect(jb.stats().hurried).toBe(0);
  });
});

/**
 * A caller with silence suppression (G.711 VAD, Opus DTX): talk spurts of `talkTicks` frames, then
 * `pauseTicks` with no packets. Sequence numbers run on across a pause, the timestamp follows the
 * clock (it jumps by the pause), and the first packet of a spurt has the marker bit if `marker`.
 * Each packet arrives `jitter()` ms after it was sent; every 20 ms tick pushes what arrived, then
 * pops as RtpSession does (pop(now), then popSurplus()). Returns, per spurt, how long its first
 * frame waited in the buffer (ms from sending to playing), and the stats at the end.
 */
function talkSpurts(
  jb: JitterBuffer,
  options: {
    spurts: number;
    talkTicks: number;
    pauseTicks: number;
    marker: boolean;
    jitter?: () => number;
  },
) {
  const { spurts, talkTicks, pauseTicks, marker, jitter = () => 0 } = options;
  const sent: Array<{ seq: number; sentAt: number; arrivesAt: number; first: boolean }> = [];
  let seq = 1000;
  for (let spurt = 0; spurt < spurts; spurt++) {
    for (let n = 0; n < talkTicks; n++) {
      const sentAt = (spurt * (talkTicks + pauseTicks) + n) * FRAME;
      sent.push({ seq: seq++, sentAt, arrivesAt: sentAt + jitter(), first: n === 0 });
    }
  }
  const arrivals = [...sent].sort((a, b) => a.arrivesAt - b.arrivesAt);
  const playedAt = new Map<number, number>();
  const ticks = spurts * (talkTicks + pauseTicks) + 20;
  let i = 0;
  for (let tick = 0; tick < ticks; tick++) {
    const now = tick * FRAME;
    for (
      ;
      i < arrivals.length && (arrivals[i] as (typeof arrivals)[number]).arrivesAt <= now;
      i++
    ) {
      const p = arrivals[i] as (typeof arrivals)[number];
      jb.push(
        {
          sequenceNumber: p.seq,
          timestamp: (p.sentAt / FRAME) * 160,
          payload: Buffer.alloc(160, 0x55),
          marker: marker && p.first,
        },
        p.arrivesAt,
      );
    }
    for (const frame of [jb.pop(now), jb.popSurplus()]) {
      if (frame?.kind === 'frame' && !playedAt.has(frame.sequenceNumber))
        playedAt.set(frame.sequenceNumber, now);
    }
  }
  const startDelays = sent
    .filter((p) => p.first)
    .map((p) => (playedAt.get(p.seq) ?? Number.NaN) - p.sentAt);
  return { startDelays, played: playedAt.size, sent: sent.length, stats: jb.stats() };
}

describe('when the caller pauses between talk spurts (silence suppression)', () => {
  it.each([
    { case: 'with the marker bit', marker: true },
    { case: 'with only the timestamp jump', marker: false },
  ])(
    'should start every spurt after the same delay, $case, and not deepen for the pauses',
    ({ marker }) => {
      const jb = buffer(20, 200);
      const { startDelays, stats } = talkSpurts(jb, {
        spurts: 12,
        talkTicks: 50,
        pauseTicks: 50,
        marker,
      });
      // With no jitter the first frame of each spurt plays in the tick it arrived, every time.
      expect(startDelays).toEqual(Array.from({ length: 12 }, () => 0));
      expect(stats).toMatchObject({ underruns: 0, targetDepthMs: 20, lost: 0, late: 0 });
    },
  );

  it('should take the comfort-noise packets of a pause for fillers, not for late audio', () => {
    const jb = buffer(20, 200);
    let seq = 0;
    const firstOfSpurt: Array<{ seq: number; tick: number }> = [];
    const playedAt = new Map<number, number>();
    for (let tick = 0; tick < 1500; tick++) {
      const talking = Math.floor(tick / 50) % 2 === 0;
      // DTX: a comfort-noise packet (held as a filler) every 400 ms of a pause.
      if (talking || tick % 20 === 0) {
        if (talking && tick % 50 === 0) firstOfSpurt.push({ seq, tick });
        jb.push(
          {
            sequenceNumber: seq,
            timestamp: tick * 160,
            payload: talking ? Buffer.alloc(160, 0x55) : Buffer.alloc(0),
            filler: !talking,
          },
          tick * FRAME,
        );
        seq++;
      }
      const frame = jb.pop(tick * FRAME);
      jb.popSurplus();
      if (frame.kind === 'frame') playedAt.set(frame.sequenceNumber, tick);
    }
    expect(firstOfSpurt).toHaveLength(15);
    expect(firstOfSpurt.map((s) => (playedAt.get(s.seq) ?? Number.NaN) - s.tick)).toEqual(
      Array.from({ length: 15 }, () => 0),
    );
    expect(jb.stats()).toMatchObject({ underruns: 0, targetDepthMs: 20, lost: 0 });
  });
});

describe('when a burst of packets is lost', () => {
  /**
   * A steady stream, one packet and one tick each 20 ms; packets 100 to 100 + lost - 1 never come.
   * Returns the tick each packet played at, and the stats.
   */
  function burstLoss(lost: number) {
    const jb = buffer(20, 200);
    const playedAt = new Map<number, number>();
    for (let tick = 0; tick < 400; tick++) {
      if (tick < 100 || tick >= 100 + lost) jb.push(packet(tick), tick * FRAME);
      for (const frame of [jb.pop(tick * FRAME), jb.popSurplus()]) {
        if (frame?.kind === 'frame') playedAt.set(frame.sequenceNumber, tick);
      }
    }
    return { playedAt, stats: jb.stats(), depth: jb.depthFrames() };
  }

  it.each([10, 20, 50])(
    'should play on from the first packet after %i lost ones, with no added delay, and count each as lost',
    (lost) => {
      const reference = burstLoss(0);
      const { playedAt, stats, depth } = burstLoss(lost);
      const resumed = 100 + lost;
      // Played within a frame of when it would have played with nothing lost (here: in the same tick).
      expect(
        Math.abs(
          (playedAt.get(resumed) ?? Number.NaN) - (reference.playedAt.get(resumed) ?? Number.NaN),
        ),
      ).toBeLessThanOrEqual(1);
      expect(playedAt.get(resumed)).toBe(reference.playedAt.get(resumed));
      // Nothing lasting: the last packet plays exactly as late as without the loss, the buffer as deep.
      expect(playedAt.get(399)).toBe(reference.playedAt.get(399));
      expect(depth).toBe(reference.depth);
      expect(stats).toMatchObject({ lost, late: 0, discarded: 0, underruns: 0, targetDepthMs: 20 });
      expect(stats.played).toBe(400 - lost);
    },
  );

  it('should count the missing numbers as lost also when the burst behind the gap overflows the buffer', () => {
    const jb = buffer(20, 100);
    jb.push(packet(0), 0);
    expect(describeFrame(jb.pop(0))).toBe('#0');
    // 30 numbers missing, then 12 packets at once (a stall behind a loss): more than the buffer may hold.
    for (let seq = 31; seq < 43; seq++) jb.push(packet(seq), 20);
    expect(jb.depthFrames()).toBeLessThanOrEqual(100 / FRAME + 2);
    const stats = jb.stats();
    expect(stats.lost).toBe(30);
    // What overflowed was received: discarded, not lost.
    expect(stats.lost + stats.discarded + jb.depthFrames() + stats.played).toBe(43);
  });
});

describe('when the network really jitters between talk spurts', () => {
  it('should deepen the buffer for the jitter, within its bounds, but not for the pauses', () => {
    const random = seededRandom(7);
    const jb = buffer(20, 200);
    const { startDelays, played, sent, stats } = talkSpurts(jb, {
      spurts: 20,
      talkTicks: 50,
      pauseTicks: 50,
      marker: true,
      jitter: () => Math.floor(random() * 60),
    });
    expect(stats.jitterMs).toBeGreaterThan(10);
    expect(stats.targetDepthMs).toBeGreaterThanOrEqual(60);
    // Twenty pauses did not push it to the maximum (200 ms): the depth follows the jitter (3 x ~25 ms).
    expect(stats.targetDepthMs).toBeLessThanOrEqual(120);
    // Deep enough to ride out the jitter: nearly every frame played.
    expect(played).toBeGreaterThan(sent * 0.95);
    // A spurt starts once its first packet has waited the depth (plus up to 60 ms of jitter on the way),
    // and that did not grow from one spurt to the next.
    expect(Math.max(...startDelays)).toBeLessThanOrEqual(140);
    expect(Math.max(...startDelays.slice(10))).toBeLessThanOrEqual(
      Math.max(...startDelays.slice(0, 10)),
    );
  });

  it('should play a packet reordered behind the first one after the buffer ran dry, and count no loss', () => {
    const jb = buffer(20, 200);
    jb.push(packet(1), 0);
    expect(describeFrame(jb.pop(0))).toBe('#1');
    expect(describeFrame(jb.pop(20))).toBe('underrun');
    // 3 overtook 2, which is in step with 1: a late packet, not a new spurt.
    jb.push(packet(3), 30);
    expect(jb.push(packet(2), 35)).toBe('buffered');
    expect([jb.pop(40), jb.pop(60)].map(describeFrame)).toEqual(['#2', '#3']);
    expect(jb.stats()).toMatchObject({ lost: 0, late: 0, underruns: 1, targetDepthMs: 40 });
  });

  it('should deepen by a frame for a packet that comes after its slot was skipped', () => {
    const jb = buffer(20, 200);
    jb.push(packet(1), 0);
    expect(describeFrame(jb.pop(0))).toBe('#1');
    expect(describeFrame(jb.pop(20))).toBe('underrun');
    jb.push(packet(3), 40);
    expect(describeFrame(jb.pop(40))).toBe('#3');
    expect(jb.push(packet(2), 50)).toBe('late');
    expect(jb.stats()).toMatchObject({ late: 1, lost: 1, targetDepthMs: 40 });
  });
});
