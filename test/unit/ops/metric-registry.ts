/**
 * What the code registers, read from the live prom-client registry after loading every product
 * module (scripts/metrics-doc.ts render() does the loading), never from a list kept by hand.
 */
import { registry } from '../../../config/metrics.ts';
import { render } from '../../../scripts/metrics-doc.ts';

export interface RegisteredMetric {
  readonly name: string;
  readonly type: string;
  readonly labels: readonly string[];
}

export interface MetricRegistry {
  /** docs/metrics.md as the registry renders it now. */
  readonly doc: string;
  readonly metrics: ReadonlyMap<string, RegisteredMetric>;
}

let loaded: Promise<MetricRegistry> | undefined;

export function loadRegistry(): Promise<MetricRegistry> {
  loaded ??= (async () => {
    const doc = await render();
    const metrics = new Map<string, RegisteredMetric>();
    for (const metric of await registry.getMetricsAsJSON()) {
      const declared =
        (registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] } | undefined)
          ?.labelNames ?? [];
      metrics.set(metric.name, { name: metric.name, type: String(metric.type), labels: declared });
    }
    return { doc, metrics };
  })();
  return loaded;
}

/**
 * Metrics the alerts and dashboards use that other components have not registered yet, with the
 * issue that adds them and the labels the queries expect. A name here is checked like any other
 * as soon as the registry has it (the registry wins); until then the test reports it as awaited.
 */
export const METRICS_AWAITED_FROM_OTHER_COMPONENTS: Readonly<
  Record<
    string,
    { readonly issue: number; readonly type: string; readonly labels: readonly string[] }
  >
> = {};

/** Labels Prometheus adds to every series from the scrape target (ServiceMonitor relabelings). */
export const TARGET_LABELS: ReadonlySet<string> = new Set([
  'namespace',
  'pod',
  'container',
  'service',
  'endpoint',
  'job',
  'instance',
  'component',
]);

const HISTOGRAM_SERIES = /_(bucket|sum|count)$/;

export interface ResolvedMetric {
  readonly base: string;
  /** The registered (or awaited) metric; undefined when neither knows the name. */
  readonly metric: RegisteredMetric | undefined;
  readonly awaited: boolean;
  /** Series of a histogram or summary that carry `le` / `quantile`. */
  readonly extraLabels: readonly string[];
}

/** Maps a series name to its metric: histogram `_bucket`/`_sum`/`_count` to the base name. */
export function resolveMetric(
  name: string,
  registered: ReadonlyMap<string, RegisteredMetric>,
): ResolvedMetric {
  const lookup = (
    candidate: string,
  ): { metric: RegisteredMetric | undefined; awaited: boolean } => {
    const found = registered.get(candidate);
    if (found) return { metric: found, awaited: false };
    const awaited = METRICS_AWAITED_FROM_OTHER_COMPONENTS[candidate];
    return awaited
      ? { metric: { name: candidate, type: awaited.type, labels: awaited.labels }, awaited: true }
      : { metric: undefined, awaited: false };
  };
  const direct = lookup(name);
  if (direct.metric)
    return {
      base: name,
      ...direct,
      extraLabels: direct.metric.type === 'summary' ? ['quantile'] : [],
    };
  const suffix = HISTOGRAM_SERIES.exec(name);
  if (suffix) {
    const base = name.slice(0, -suffix[0].length);
    const parent = lookup(base);
    if (parent.metric && (parent.metric.type === 'histogram' || parent.metric.type === 'summary')) {
      return { base, ...parent, extraLabels: suffix[1] === 'bucket' ? ['le'] : [] };
    }
  }
  return { base: name, metric: undefined, awaited: false, extraLabels: [] };
}
