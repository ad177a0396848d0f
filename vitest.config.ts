import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real processes (redis-server, workers, sipp); two cores do not
    // profit from more than two test files at a time.
    maxWorkers: 2,
    pool: 'forks',
  },
});
