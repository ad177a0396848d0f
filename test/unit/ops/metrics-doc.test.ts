import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './chart-files.ts';
import { loadRegistry } from './metric-registry.ts';

describe('when docs/metrics.md is compared with the metrics registry', () => {
  it(
    'should be what scripts/metrics-doc.ts renders now (regenerate: npx tsx scripts/metrics-doc.ts)',
    { timeout: 120_000 },
    async () => {
      const { doc, metrics } = await loadRegistry();
      expect(readFileSync(join(ROOT, 'docs/metrics.md'), 'utf8')).toBe(doc);
      // Every registered product metric has its row, with its type.
      for (const metric of metrics.values()) {
        if (
          metric.name.startsWith('callgate_process_') ||
          metric.name.startsWith('callgate_nodejs_')
        )
          continue;
        expect(doc, metric.name).toContain(`| \`${metric.name}\` | ${metric.type} |`);
      }
    },
  );
});
