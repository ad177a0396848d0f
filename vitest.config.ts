import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest test files, in seconds (vitest's per-file durations of a whole run on two cores).
 * They start first: without vitest's results cache (a fresh clone, as in CI, or the Node 24 pass's
 * copy) files go largest first, and these short files would start last and run alone at the end.
 */
const LONG_RUNNING: Readonly<Record<string, number>> = {
  'test/chaos/chaos-short.test.ts': 82,
  'test/e2e/softphone-baresip.test.ts': 44,
  'test/scenarios/model-lost-apology.test.ts': 40,
  'test/integration/exactly-once/sending-mark-durable.test.ts': 34,
  'test/e2e/softphone-baresip-tls.test.ts': 30,
};

/** vitest's order (failed first, then longest first from its cache), with LONG_RUNNING ahead. */
class LongRunningFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const seconds = (spec: TestSpecification): number =>
      LONG_RUNNING[relative(this.ctx.config.root, spec.moduleId)] ?? 0;
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => seconds(b.spec) - seconds(a.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real processes (redis-server, workers, sipp) and mostly wait on
    // real time (speech played at its pace, timers): three files at a time on two cores keep them
    // busy without starving them (a whole run: 958 s with two, 648 s with three, on a loaded machine).
    maxWorkers: 3,
    pool: 'forks',
    sequence: { sequencer: LongRunningFirst },
  },
});
