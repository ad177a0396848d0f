/**
 * Generates docs/metrics.md from the metrics registry itself: every module of the product is
 * loaded (entry points excepted, they start servers), then every registered metric is listed with
 * its type, labels and help. `--check` exits 1 when the committed file differs.
 *
 *   npx tsx scripts/metrics-doc.ts          write docs/metrics.md
 *   npx tsx scripts/metrics-doc.ts --check  verify it is current
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { registry, collectProcessMetrics } from '../config/metrics.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DOC = join(ROOT, 'docs/metrics.md');
const FOLDERS = ['config', 'jobs', 'agents', 'gateway'];

function sources(dir: string): string[] {
  let out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out = out.concat(sources(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts') && !/main\.ts$/.test(name))
      out.push(path);
  }
  return out;
}

const QUERIES = `## Rates to watch

UNKNOWN rate: the share of operations whose outcome was lost after sending (per action, 5 m):

\`\`\`promql
sum by (action) (rate(callgate_unknown_opened_total[5m]))
  / sum by (action) (rate(callgate_operation_attempts_total{kind="first"}[5m]))
\`\`\`

Operations UNKNOWN right now, and the oldest one's age (every worker reports the same value, read
from Redis, so take the max, not the sum):

\`\`\`promql
max by (tenant) (callgate_operations_unknown)
max by (tenant) (callgate_operations_unknown_oldest_age_seconds)
\`\`\`

Retry rate: retries per first attempt (per action, 5 m):

\`\`\`promql
sum by (action) (rate(callgate_operation_attempts_total{kind="retry"}[5m]))
  / sum by (action) (rate(callgate_operation_attempts_total{kind="first"}[5m]))
\`\`\`

Retry-budget exhaustion, reconciliation failures, admission refusals by policy:

\`\`\`promql
sum by (action) (increase(callgate_retry_budget_exhausted_total[15m]))
sum by (action, outcome) (rate(callgate_reconciliations_total{outcome=~"unknown|error|no_lookup"}[15m]))
sum by (tenant, action, policy, outcome) (rate(callgate_admission_decisions_total{outcome=~"busy_.*|degraded"}[5m]))
\`\`\`

Queue depth (what a queue-depth autoscaler should read: waiting + prioritized + delayed; every pod
reports the same Redis counts, so take the max per queue and state first):

\`\`\`promql
sum by (queue) (max by (queue, state) (callgate_queue_jobs{state=~"waiting|prioritized|delayed"}))
\`\`\`
`;

export async function render(): Promise<string> {
  collectProcessMetrics();
  for (const folder of FOLDERS) {
    for (const file of sources(join(ROOT, folder)).sort()) await import(pathToFileURL(file).href);
  }
  const metrics = (await registry.getMetricsAsJSON())
    .filter(
      (m) => !m.name.startsWith('callgate_process_') && !m.name.startsWith('callgate_nodejs_'),
    )
    .sort((a, b) => a.name.localeCompare(b.name));
  const rows = metrics.map((m) => {
    const declared =
      (registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] } | undefined)
        ?.labelNames ?? [];
    return `| \`${m.name}\` | ${m.type} | ${declared.map((l) => `\`${l}\``).join(', ')} | ${m.help.replace(/\|/g, '\\|')} |`;
  });
  return [
    '# Metrics',
    '',
    'Generated from the metrics registry by `npx tsx scripts/metrics-doc.ts`; a test keeps it current.',
    'Every name is prefixed `callgate_`. Process metrics (`callgate_process_*`, `callgate_nodejs_*`) come',
    'from prom-client and are not listed. The tenant label appears only where configuration bounds it.',
    '',
    QUERIES,
    '## Exemplars',
    '',
    'A scrape that asks for OpenMetrics (`Accept: application/openmetrics-text`, as Prometheus does) gets',
    'the same metrics in that format, with exemplars on the metrics below: each observation carries the',
    "call's `session_id`, and `operation_id` where an operation is behind it, so a slow bucket in a",
    "dashboard leads to the call's timeline (`/calls/<session_id>`) and the operation",
    '(`/v1/operations/<operation_id>`). Prometheus keeps exemplars with `--enable-feature=exemplar-storage`.',
    'Any other scrape gets the Prometheus text format, without exemplars.',
    '',
    ...metrics
      .filter(
        (m) =>
          (registry.getSingleMetric(m.name) as unknown as { enableExemplars?: boolean } | undefined)
            ?.enableExemplars === true,
      )
      .map((m) => `- \`${m.name}\``),
    '',
    '## All metrics',
    '',
    '| name | type | labels | help |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const text = await render();
  if (process.argv.includes('--check')) {
    const current = readFileSync(DOC, 'utf8');
    if (current !== text) {
      process.stderr.write(
        `${relative(ROOT, DOC)} is out of date: run npx tsx scripts/metrics-doc.ts\n`,
      );
      process.exit(1);
    }
  } else {
    writeFileSync(DOC, text);
  }
  process.exit(0);
}
