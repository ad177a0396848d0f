/**
 * Runs the benchmarks by name, one after another, each in its own process so that one cannot warm
 * up or slow down the next:
 *
 *   npm run bench                      lists them
 *   npm run bench -- actions media     runs bench/actions-bench.ts, then bench/media-bench.ts
 *   npm run bench -- all               runs every one
 *
 * Arguments after `--` that start with `--` are passed to every benchmark run. Each runs with the
 * gateway's own runtime flags (those of `npm start` and the image). Record the numbers in
 * bench/RESULTS.md with the command that produced them.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const BENCH_DIR = fileURLToPath(new URL('./', import.meta.url));
const SUFFIX = '-bench.ts';
/** The gateway's runtime flags (package.json `start`, the Dockerfile's CMD): measure what runs. */
const GATEWAY_NODE_FLAGS = ['--min-semi-space-size=16', '--max-semi-space-size=16'];

const available = readdirSync(BENCH_DIR)
  .filter((file) => file.endsWith(SUFFIX))
  .map((file) => file.slice(0, -SUFFIX.length))
  .sort();

const args = process.argv.slice(2);
// Names first, then options with their values: `actions media --seconds 5`.
const firstOption = args.findIndex((a) => a.startsWith('--'));
const names = firstOption < 0 ? args : args.slice(0, firstOption);
const passOn = firstOption < 0 ? [] : args.slice(firstOption);

if (names.length === 0) {
  process.stdout.write(
    `benchmarks: ${available.join(', ')}\nrun: npm run bench -- <name ...> | all [--option value ...]\n`,
  );
  process.exit(0);
}
const chosen = names.includes('all') ? available : names;
const unknown = chosen.filter((name) => !available.includes(name));
if (unknown.length > 0) {
  process.stderr.write(
    `unknown benchmark ${unknown.join(', ')}; there are: ${available.join(', ')}\n`,
  );
  process.exit(2);
}

let failed = 0;
for (const name of chosen) {
  process.stdout.write(
    `\n== ${name} (load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')})\n`,
  );
  const run = spawnSync(
    process.execPath,
    [...GATEWAY_NODE_FLAGS, '--import', 'tsx', `${BENCH_DIR}${name}${SUFFIX}`, ...passOn],
    { stdio: 'inherit' },
  );
  if (run.status !== 0) {
    failed++;
    process.stderr.write(`${name} exited with ${String(run.status ?? run.signal)}\n`);
  }
}
process.exit(failed === 0 ? 0 : 1);
