/**
 * The one Prometheus registry every module adds to. Metric names are prefixed `callgate_`;
 * asking twice for the same name returns the same metric, so modules can declare their metrics
 * where they use them without coordinating registration order.
 */
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
  type LabelValues,
} from 'prom-client';

export const METRIC_PREFIX = 'callgate_';

export const registry = new Registry();
let defaultsCollected = false;

/** Process metrics (CPU, memory, event loop lag, GC), once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
}

/**
 * Adds a metric to the registry after construction: prom-client refuses exemplars on a metric
 * constructed into a Prometheus-format registry, yet callgate serves both formats from this one
 * (the Prometheus text without exemplars, OpenMetrics with them; see openMetricsText).
 */
function registered<M extends Parameters<Registry['registerMetric']>[0]>(metric: M): M {
  registry.registerMetric(metric);
  return metric;
}

function checkName(name: string): void {
  if (!name.startsWith(METRIC_PREFIX))
    throw new Error(`metric ${name} must be prefixed ${METRIC_PREFIX}`);
}

export function counter<L extends string>(
  config: Omit<CounterConfiguration<L>, 'registers'>,
): Counter<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Counter<L>;
  return registered(new Counter<L>({ ...config, registers: [] }));
}

export function gauge<L extends string>(
  config: Omit<GaugeConfiguration<L>, 'registers'>,
): Gauge<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Gauge<L>;
  return new Gauge<L>({ ...config, registers: [registry] });
}

export function histogram<L extends string>(
  config: Omit<HistogramConfiguration<L>, 'registers'>,
): Histogram<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Histogram<L>;
  return registered(new Histogram<L>({ ...config, registers: [] }));
}

/** Buckets in seconds for fast paths (admission, setup): 0.5 ms .. 5 s. */
export const FAST_SECONDS_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
];
/** Buckets in seconds for business actions and delivery: 10 ms .. 10 min. */
export const SLOW_SECONDS_BUCKETS = [
  0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];

// ---- exemplars ---------------------------------------------------------------------------------

/**
 * OpenMetrics allows an exemplar's label names and values 128 characters in all; labels that would
 * pass it are left out (in the order given), so an exemplar never fails the observation it rides on.
 */
export const EXEMPLAR_BUDGET = 128;

/** The labels of an exemplar that fit the budget; unset values are skipped. */
export function exemplarLabels(
  labels: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const fitted: Record<string, string> = {};
  let used = 0;
  for (const [name, value] of Object.entries(labels)) {
    if (value === undefined || value === '') continue;
    const size = name.length + value.length;
    if (used + size > EXEMPLAR_BUDGET) continue;
    fitted[name] = value;
    used += size;
  }
  return fitted;
}

/**
 * Observes on a histogram made with `enableExemplars: true`, the observation carrying an exemplar
 * (e.g. the call's session id) so that a slow bucket in a dashboard leads to the call behind it.
 */
export function observeWithExemplar<L extends string>(
  metric: Histogram<L>,
  labels: LabelValues<L>,
  value: number,
  exemplar: Readonly<Record<string, string | undefined>>,
): void {
  metric.observe({ labels, value, exemplarLabels: exemplarLabels(exemplar) as LabelValues<L> });
}

/** Counts on a counter made with `enableExemplars: true`, with an exemplar. */
export function incWithExemplar<L extends string>(
  metric: Counter<L>,
  labels: LabelValues<L>,
  exemplar: Readonly<Record<string, string | undefined>>,
  value = 1,
): void {
  metric.inc({ labels, value, exemplarLabels: exemplarLabels(exemplar) as LabelValues<L> });
}

// ---- OpenMetrics exposition ----------------------------------------------------------------------

export const OPENMETRICS_CONTENT_TYPE =
  'application/openmetrics-text; version=1.0.0; charset=utf-8';

/** True when a scraper's Accept header asks for OpenMetrics (Prometheus does when it stores exemplars). */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && /application\/openmetrics-text/i.test(accept);
}

interface ExportedValue {
  readonly value: number;
  readonly labels?: Readonly<Record<string, string | number | undefined>>;
  readonly metricName?: string;
  readonly exemplar?: {
    readonly labelSet: Readonly<Record<string, string | number>>;
    readonly value: number | null;
    readonly timestamp?: number;
  } | null;
}

interface ExportedMetric {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly values: readonly ExportedValue[];
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function number(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

function labelText(labels: Readonly<Record<string, string | number | undefined>>): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (value === undefined) continue;
    parts.push(`${name}="${escapeLabelValue(typeof value === 'number' ? number(value) : value)}"`);
  }
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

/**
 * One metric family in the OpenMetrics 1.0 text format: counters are named without `_total` in
 * TYPE and HELP and with it on their samples; exemplars follow a sample as ` # {labels} value ts`.
 * Pure: the exposition of what prom-client's get() returned.
 */
export function openMetricsFamily(metric: ExportedMetric): string {
  const isCounter = metric.type === 'counter';
  const family = isCounter ? metric.name.replace(/_total$/, '') : metric.name;
  const type = ['counter', 'gauge', 'histogram', 'summary'].includes(metric.type)
    ? metric.type
    : 'unknown';
  const lines = [`# TYPE ${family} ${type}`, `# HELP ${family} ${escapeHelp(metric.help)}`];
  for (const sample of metric.values) {
    const name = isCounter ? `${family}_total` : (sample.metricName ?? metric.name);
    let line = `${name}${labelText(sample.labels ?? {})} ${number(sample.value)}`;
    const exemplar = sample.exemplar;
    if (
      exemplar !== undefined &&
      exemplar !== null &&
      exemplar.value !== null &&
      Object.keys(exemplar.labelSet).length > 0
    ) {
      line += ` # ${labelText(exemplar.labelSet) || '{}'} ${number(exemplar.value)}${exemplar.timestamp === undefined ? '' : ` ${exemplar.timestamp.toFixed(3)}`}`;
    }
    lines.push(line);
  }
  return lines.join('\n');
}

/** The whole registry in the OpenMetrics text format, ending with `# EOF`. */
export async function openMetricsText(from: Registry = registry): Promise<string> {
  const families: string[] = [];
  for (const metric of from.getMetricsAsArray()) {
    families.push(
      openMetricsFamily(await (metric as unknown as { get(): Promise<ExportedMetric> }).get()),
    );
  }
  return `${families.join('\n')}\n# EOF\n`;
}
