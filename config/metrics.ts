/**
 * The one Prometheus registry every module adds to. Metric names are prefixed `callgate_`;
 * asking twice for the same name returns the same metric, so modules can declare their metrics
 * where they use them without coordinating registration order.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from 'prom-client';

export const METRIC_PREFIX = 'callgate_';

export const registry = new Registry();
let defaultsCollected = false;

/** Process metrics (CPU, memory, event loop lag, GC), once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
}

function checkName(name: string): void {
  if (!name.startsWith(METRIC_PREFIX)) throw new Error(`metric ${name} must be prefixed ${METRIC_PREFIX}`);
}

export function counter<L extends string>(config: Omit<CounterConfiguration<L>, 'registers'>): Counter<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Counter<L>;
  return new Counter<L>({ ...config, registers: [registry] });
}

export function gauge<L extends string>(config: Omit<GaugeConfiguration<L>, 'registers'>): Gauge<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Gauge<L>;
  return new Gauge<L>({ ...config, registers: [registry] });
}

export function histogram<L extends string>(config: Omit<HistogramConfiguration<L>, 'registers'>): Histogram<L> {
  checkName(config.name);
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing as Histogram<L>;
  return new Histogram<L>({ ...config, registers: [registry] });
}

/** Buckets in seconds for fast paths (admission, setup): 0.5 ms .. 5 s. */
export const FAST_SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Buckets in seconds for business actions and delivery: 10 ms .. 10 min. */
export const SLOW_SECONDS_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
