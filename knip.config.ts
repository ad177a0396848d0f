/**
 * Dead-code check (`npm run deadcode`, part of `npm test`): files, exports, types and packages
 * that nothing uses.
 *
 * Entry points besides those listed: knip reads gateway/main.ts, jobs/worker-main.ts and
 * jobs/providers/sandbox/sandbox-main.ts from the package.json scripts, vitest.config.ts (with its
 * test files and global setup) and eslint.config.js from its vitest and eslint plugins.
 */
const config = {
  entry: [
    // Run on its own with tsx (gateway/realtime/README.md), like the sandbox.
    'gateway/realtime/simulator/simulator-main.ts',
    'scripts/*.ts',
    'bench/**/*.ts',
    'test/**/*.ts',
  ],
  project: ['{gateway,agents,jobs,config,test,bench,scripts}/**/*.ts'],
  // An export its own module uses is not dead, only wider than it needs to be.
  ignoreExportsUsedInFile: true,
  ignoreBinaries: [
    // Debian packages that scripts/bootstrap.sh installs, driven by tests and benches.
    'sipp',
    'redis-server',
    'redis-cli',
    'baresip',
    'espeak-ng',
    'sox',
    'dumpcap',
    'taskset',
    'openssl',
    // Ships with npm itself (build:native).
    'node-gyp',
  ],
};

export default config;
