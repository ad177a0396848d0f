import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  EXEMPLAR_BUDGET,
  exemplarLabels,
  incWithExemplar,
  observeWithExemplar,
  openMetricsText,
  wantsOpenMetrics,
} from '../../../config/metrics.ts';

/** A registry of its own (Prometheus format, as callgate's), so the test does not depend on what other modules registered. */
function metrics() {
  const registry = new Registry();
  const ended = new Counter({
    name: 'callgate_test_calls_ended_total',
    help: 'Calls ended, by "reason"\nsecond line',
    labelNames: ['reason'],
    registers: [],
    enableExemplars: true,
  });
  const setup = new Histogram({
    name: 'callgate_test_setup_seconds',
    help: 'Setup time',
    labelNames: ['tenant'],
    buckets: [0.1, 1],
    registers: [],
    enableExemplars: true,
  });
  const active = new Gauge({
    name: 'callgate_test_calls_active',
    help: 'Active calls',
    labelNames: ['tenant'],
    registers: [registry],
  });
  registry.registerMetric(ended);
  registry.registerMetric(setup);
  return { registry, ended, setup, active };
}

describe('when the registry is exposed in the OpenMetrics format', () => {
  it('should name counter families without _total, carry exemplars on their bucket, escape, and end with # EOF', async () => {
    const { registry, ended, setup, active } = metrics();
    incWithExemplar(ended, { reason: 'caller_hung_up' }, { session_id: 'sess-01J' });
    observeWithExemplar(setup, { tenant: 'demo' }, 0.42, { session_id: 'sess-01J' });
    setup.observe({ labels: { tenant: 'demo' }, value: 0.05 });
    active.set({ tenant: 'a"b\\c\nd' }, 2);
    const text = await openMetricsText(registry);
    const lines = text.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.at(-2)).toBe('# EOF');
    expect(lines).toContain('# TYPE callgate_test_calls_ended counter');
    expect(lines).toContain(
      '# HELP callgate_test_calls_ended Calls ended, by \\"reason\\"\\nsecond line',
    );
    expect(lines.find((l) => l.startsWith('callgate_test_calls_ended_total{'))).toMatch(
      /^callgate_test_calls_ended_total\{reason="caller_hung_up"\} 1 # \{session_id="sess-01J"\} 1 \d+\.\d{3}$/,
    );
    expect(lines).toContain('# TYPE callgate_test_setup_seconds histogram');
    // 0.05 lands in le=0.1 with no exemplar; 0.42 in le=1 with its session.
    expect(lines).toContain('callgate_test_setup_seconds_bucket{le="0.1",tenant="demo"} 1');
    expect(lines.find((l) => l.startsWith('callgate_test_setup_seconds_bucket{le="1",'))).toMatch(
      /^callgate_test_setup_seconds_bucket\{le="1",tenant="demo"\} 2 # \{session_id="sess-01J"\} 0\.42 \d+\.\d{3}$/,
    );
    expect(lines).toContain('callgate_test_setup_seconds_bucket{le="+Inf",tenant="demo"} 2');
    expect(lines).toContain('callgate_test_setup_seconds_count{tenant="demo"} 2');
    expect(lines).toContain('callgate_test_calls_active{tenant="a\\"b\\\\c\\nd"} 2');
    // Every sample line belongs to a family announced before it.
    const families = new Set(
      lines.filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]),
    );
    for (const line of lines.filter((l) => l !== '' && !l.startsWith('#'))) {
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0] ?? '';
      expect(
        [...families].some((f) => name === f || name.startsWith(`${f}_`)),
        line,
      ).toBe(true);
    }
  });

  it('should leave the Prometheus text format as it was: counters keep _total, no exemplars', async () => {
    const { registry, ended } = metrics();
    incWithExemplar(ended, { reason: 'caller_hung_up' }, { session_id: 'sess-01J' });
    await openMetricsText(registry);
    const text = await registry.metrics();
    expect(text).toContain('callgate_test_calls_ended_total{reason="caller_hung_up"} 1\n');
    expect(text).not.toContain('session_id');
  });
});

describe('when exemplar labels are given', () => {
  it('should keep what fits the 128-character budget, in order, and skip unset values', () => {
    const long = 'x'.repeat(100);
    expect(exemplarLabels({ session_id: 'sess-1', operation_id: undefined, trace: long })).toEqual({
      session_id: 'sess-1',
      trace: long,
    });
    const fitted = exemplarLabels({ session_id: long, operation_id: 'op_01J' + 'y'.repeat(40) });
    expect(fitted).toEqual({ session_id: long });
    expect(
      Object.entries(fitted).reduce((n, [k, v]) => n + k.length + v.length, 0),
    ).toBeLessThanOrEqual(EXEMPLAR_BUDGET);
  });

  it('should never fail the observation it rides on', () => {
    const { setup } = metrics();
    expect(() =>
      observeWithExemplar(setup, { tenant: 'demo' }, 0.2, { session_id: 'z'.repeat(500) }),
    ).not.toThrow();
  });
});

describe('when a scraper names the formats it accepts', () => {
  it.each([
    [
      'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1',
      true,
    ],
    ['text/plain;version=0.0.4', false],
    [undefined, false],
  ])('should choose OpenMetrics for %s: %s', (accept, expected) => {
    expect(wantsOpenMetrics(accept)).toBe(expected);
  });
});
