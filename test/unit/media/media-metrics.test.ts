import { Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PLAYOUT_LATENESS_BUCKETS, addObservations, latenessBucket } from '../../../gateway/media/media-metrics.ts';

function histogram(name: string): Histogram {
  return new Histogram({ name, help: 'test', buckets: [...PLAYOUT_LATENESS_BUCKETS], registers: [] });
}

async function exposition(h: Histogram): Promise<Array<{ metricName?: string; labels: object; value: number }>> {
  return (await h.get()).values.map(({ metricName, labels, value }) => ({ metricName, labels, value }));
}

describe('when sessions add their playout lateness once a second', () => {
  it('should expose exactly what one observe() per frame would have', async () => {
    // Edges, values inside each bucket and above the last bound (the +Inf bucket).
    const values = [0, 0.0005, 0.0004, 0.0007, 0.001, 0.0015, 0.003, 0.0049, 0.007, 0.01, 0.015, 0.03, 0.05, 0.08, 0.09, 0.5, 0.0001, 0.012];
    const perFrame = histogram('per_frame_seconds');
    for (const value of values) perFrame.observe(value);

    const bulk = histogram('bulk_seconds');
    // Two flushes, as two seconds of a call would do.
    for (const part of [values.slice(0, 7), values.slice(7)]) {
      const counts = new Uint32Array(PLAYOUT_LATENESS_BUCKETS.length + 1);
      for (const value of part) counts[latenessBucket(value)] = (counts[latenessBucket(value)] as number) + 1;
      addObservations(bulk, PLAYOUT_LATENESS_BUCKETS, counts, part.reduce((a, b) => a + b, 0));
    }
    const rename = (rows: Awaited<ReturnType<typeof exposition>>) => rows.map((row) => ({ ...row, metricName: row.metricName?.replace(/^(per_frame|bulk)_/, '') }));
    const expected = rename(await exposition(perFrame));
    const actual = rename(await exposition(bulk));
    expect(actual.map((row) => ({ ...row, value: Number(row.value.toFixed(9)) }))).toEqual(expected.map((row) => ({ ...row, value: Number(row.value.toFixed(9)) })));
    expect(actual.find((row) => row.metricName === 'seconds_count')?.value).toBe(values.length);
  });

  it('should add nothing for a second without frames', async () => {
    const bulk = histogram('idle_seconds');
    addObservations(bulk, PLAYOUT_LATENESS_BUCKETS, new Uint32Array(PLAYOUT_LATENESS_BUCKETS.length + 1), 0);
    expect((await bulk.get()).values.every((row) => row.value === 0)).toBe(true);
  });
});
