/**
 * How long `npm start` takes on embedded defaults (no configuration file, no REDIS_URL: a
 * private redis-server, the embedded sandbox and simulator, SIP, RTP and the workers) to be ready:
 * from the spawn to the "callgate ready" log line and to the first `/readyz` 200, then how long a
 * SIGTERM takes to stop it. Each run is a fresh process on fresh loopback ports.
 *
 *   npx tsx bench/startup-bench.ts [--runs 5]
 *
 * Target: ready within 10 s on the reference machine (the median of the runs); the numbers go in
 * bench/RESULTS.md with the command and the machine's load.
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { freeLoopbackPort } from '../jobs/redis/local-redis.ts';
import { argument } from './args.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** The gateway's runtime flags, as `npm start` passes them. */
const NODE_FLAGS = ['--min-semi-space-size=16', '--max-semi-space-size=16', '--import', 'tsx'];
const READY_LIMIT_MS = 60_000;
const POLL_MS = 20;

interface Run {
  readonly readyLineMs: number;
  readonly readyzMs: number;
  readonly stopMs: number;
  readonly exitCode: number | null;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function readyzOk(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`);
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

async function oneRun(): Promise<Run> {
  const httpPort = await freeLoopbackPort();
  const env = {
    ...process.env,
    CALLGATE_HTTP_PORT: String(httpPort),
    CALLGATE__http__operator__port: '0',
    CALLGATE_SIP_PORT: String(await freeLoopbackPort()),
    CALLGATE_SIP_TCP_PORT: String(await freeLoopbackPort()),
    CALLGATE_CONFIG: '',
    REDIS_URL: '',
  };
  const started = performance.now();
  const child = spawn(process.execPath, [...NODE_FLAGS, 'gateway/main.ts'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let readyLineMs = Number.NaN;
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    if (Number.isNaN(readyLineMs) && output.includes('"callgate ready"'))
      readyLineMs = performance.now() - started;
  });
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let readyzMs = Number.NaN;
  while (performance.now() - started < READY_LIMIT_MS && child.exitCode === null) {
    if (await readyzOk(httpPort)) {
      readyzMs = performance.now() - started;
      break;
    }
    await sleep(POLL_MS);
  }
  const stopping = performance.now();
  child.kill('SIGTERM');
  const exitCode = await exited;
  const stopMs = performance.now() - stopping;
  if (Number.isNaN(readyzMs)) process.stderr.write(`not ready; its output:\n${output}\n`);
  return { readyLineMs, readyzMs, stopMs, exitCode };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}

const runs = Number(argument('runs', '5'));
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
process.stdout.write(`startup on embedded defaults, ${runs} runs (load average ${load()})\n`);
const results: Run[] = [];
for (let index = 0; index < runs; index++) {
  const run = await oneRun();
  results.push(run);
  process.stdout.write(
    `run ${index + 1}: "callgate ready" ${run.readyLineMs.toFixed(0)} ms, /readyz 200 ${run.readyzMs.toFixed(0)} ms, SIGTERM to exit ${run.stopMs.toFixed(0)} ms (code ${run.exitCode})\n`,
  );
}
const readyz = results.map((run) => run.readyzMs);
process.stdout.write(
  `median /readyz ${median(readyz).toFixed(0)} ms (max ${Math.max(...readyz).toFixed(0)}), median ready line ${median(results.map((run) => run.readyLineMs)).toFixed(0)} ms, median stop ${median(results.map((run) => run.stopMs)).toFixed(0)} ms (load average ${load()})\n`,
);
const failed = results.some((run) => Number.isNaN(run.readyzMs) || run.exitCode !== 0);
process.exit(failed ? 1 : 0);
