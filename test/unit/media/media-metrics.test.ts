import { Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  PLAYOUT_LATENESS_BUCKETS,
  addDrops,
  addLateness,
  addMediaCounts,
  addObservations,
  emptyMediaCounts,
  latenessBucket,
  playoutLateness,
  publishMediaCounts,
  rtpBytes,
  rtpDropped,
  rtpHurried,
  rtpLost,
  rtpPackets,
} from '../../../gateway/media/media-metrics.ts';

function histogram(name: string): Histogram {
  return new Histogram({
    name,
    help: 'test',
    buckets: [...PLAYOUT_LATENESS_BUCKETS],
    registers: [],
  });
}

async function exposition(
  h: Histogram,
): Promise<Array<{ metricName?: string; labels: object; value: number }>> {
  return (await h.get()).values.map(({ metricName, labels, value }) => ({
    metricName,
    labels,
    value,
  }));
}

describe('when sessions add their playout lateness once a second', () => {
  it('should expose exactly what one observe() per frame would have', async () => {
    // Edges, values inside each bucket and above the last bound (the +Inf bucket).
    const values = [
      0, 0.0005, 0.0004, 0.0007, 0.001, 0.0015, 0.003, 0.0049, 0.007, 0.01, 0.015, 0.03, 0.05, 0.08,
      0.09, 0.5, 0.0001, 0.012,
    ];
    const perFrame = histogram('per_frame_seconds');
    for (const value of values) perFrame.observe(value);

    const bulk = histogram('bulk_seconds');
    // Two flushes, as two seconds of a call would do.
    for (const part of [values.slice(0, 7), values.slice(7)]) {
      const counts = new Uint32Array(PLAYOUT_LATENESS_BUCKETS.length + 1);
      for (const value of part)
        counts[latenessBucket(value)] = (counts[latenessBucket(value)] as number) + 1;
      addObservations(
        bulk,
        PLAYOUT_LATENESS_BUCKETS,
        counts,
        part.reduce((a, b) => a + b, 0),
      );
    }
    const rename = (rows: Awaited<ReturnType<typeof exposition>>) =>
      rows.map((row) => ({
        ...row,
        metricName: row.metricName?.replace(/^(per_frame|bulk)_/, ''),
      }));
    const expected = rename(await exposition(perFrame));
    const actual = rename(await exposition(bulk));
    expect(actual.map((row) => ({ ...row, value: Number(row.value.toFixed(9)) }))).toEqual(
      expected.map((row) => ({ ...row, value: Number(row.value.toFixed(9)) })),
    );
    expect(actual.find((row) => row.metricName === 'seconds_count')?.value).toBe(values.length);
  });

  it('should add nothing for a second without frames', async () => {
    const bulk = histogram('idle_seconds');
    addObservations(
      bulk,
      PLAYOUT_LATENESS_BUCKETS,
      new Uint32Array(PLAYOUT_LATENESS_BUCKETS.length + 1),
      0,
    );
    expect((await bulk.get()).values.every((row) => row.value === 0)).toBe(true);
  });
});

describe('when sessions add their counts to the process metrics', () => {
  it('should show every addition at the next read of any media metric, once', async () => {
    const read = async (
      metric: {
        get(): Promise<{ values: Array<{ labels: object; value: number; metricName?: string }> }>;
      },
      labels: object = {},
      name?: string,
    ) =>
      (await metric.get()).values
        .filter(
          (v) =>
            (name === undefined || v.metricName === name) &&
            Object.entries(labels).every(
              ([k, value]) => (v.labels as Record<string, unknown>)[k] === value,
            ),
        )
        .reduce((sum, v) => sum + v.value, 0);
    const before = {
      in: await read(rtpPackets, { direction: 'in' }),
      bytesOut: await read(rtpBytes, { direction: 'out' }),
      lost: await read(rtpLost),
      hurried: await read(rtpHurried),
      probation: await read(rtpDropped, { reason: 'ssrc-probation' }),
      lateness: await read(playoutLateness, {}, 'callgate_rtp_playout_lateness_seconds_count'),
    };
    const flushed = emptyMediaCounts();
    const now = { ...emptyMediaCounts(), packetsIn: 50, bytesOut: 8600, lost: 2, hurried: 1 };
    addMediaCounts(now, flushed);
    addMediaCounts({ ...now, packetsIn: 70, hurried: 4 }, now);
    addDrops('ssrc-probation', 3);
    addDrops('ssrc-probation', 0);
    const counts = new Uint32Array(PLAYOUT_LATENESS_BUCKETS.length + 1);
    counts[0] = 40;
    counts[3] = 2;
    addLateness(counts, 0.01);
    // Read through another metric first: one read publishes everything.
    expect((await read(rtpLost)) - before.lost).toBe(2);
    expect((await read(rtpHurried)) - before.hurried).toBe(4);
    expect((await read(rtpPackets, { direction: 'in' })) - before.in).toBe(70);
    expect((await read(rtpBytes, { direction: 'out' })) - before.bytesOut).toBe(8600);
    expect((await read(rtpDropped, { reason: 'ssrc-probation' })) - before.probation).toBe(3);
    expect(
      (await read(playoutLateness, {}, 'callgate_rtp_playout_lateness_seconds_count')) -
        before.lateness,
    ).toBe(42);
    // Nothing is published twice.
    expect((await read(rtpPackets, { direction: 'in' })) - before.in).toBe(70);
    publishMediaCounts();
    expect((await read(rtpLost)) - before.lost).toBe(2);
  });
});
