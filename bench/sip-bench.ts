/**
 * Drives the built-in stack (RFC timers, default UDP receive buffer) with sipp at fixed call
 * rates over UDP on loopback, each call held `--hold` seconds, and prints per rate:
 *
 * - INVITE-to-200 p50/p99 two ways. `gateway`: the `callgate_sip_setup_seconds` histogram (what
 *   /metrics serves; the driver runs in this process so the registry is read directly), its
 *   buckets diffed before and after the rate and interpolated as histogram_quantile does: the
 *   time from the INVITE read off the socket to the 200 handed back to it. `caller`: sipp's
 *   response time for each call (-trace_rtt, every call): from the INVITE sent to the 200
 *   received, so it also holds the time the datagram waited in the kernel while the event loop
 *   was busy, which the gateway cannot see; sipp reports it in whole milliseconds.
 * - failed calls and retransmissions (sipp's and the gateway's counters), CPU per call (this
 *   process: the whole stack), the most dialogs held at once, heap per dialog (gc'd heap while
 *   all calls are up, over the baseline), and heap once the calls have ended and the transaction
 *   timers (64*T1 = 32 s) have run out, with the stack's maps of dialogs and transactions.
 *
 * Every run stops by itself: sipp gets -timeout and a per-message -recv_timeout, and is killed by
 * its PID if it overstays anyway.
 *
 * Usage: flock /tmp/callgate-bench.lock npx tsx bench/sip-bench.ts [--rates 100,300,1000]
 *        [--seconds 10] [--hold 10] [--settle 34]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Logger } from '../config/log.ts';
import { registry } from '../config/metrics.ts';
import { sipSchema, tenantSchema } from '../config/schema.ts';
import { BuiltinSignalingDriver } from '../gateway/sip/builtin-driver.ts';
import { freeLoopbackPort } from '../jobs/redis/local-redis.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const rates = arg('rates', '100,300,1000').split(',').map(Number);
const seconds = Number(arg('seconds', '10'));
const holdSeconds = Number(arg('hold', '10'));
/** Past Timer J (64*T1 = 32 s): the last BYE transactions must be gone before "after" is read. */
const settleSeconds = Number(arg('settle', '34'));
const scenario = resolve(import.meta.dirname, '../test/fixtures/sipp/uac-caller-bye.xml');
/** sipp's own socket buffers: at 1,000 calls/s its default 64 KB drops 200s in bursts. */
const SIPP_BUFFER_BYTES = 4_194_304;

const heap = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

async function counter(name: string): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  return (metric?.values ?? []).reduce((sum, value) => sum + value.value, 0);
}

/** Cumulative bucket counts of the setup-time histogram, by upper bound. */
async function setupBuckets(): Promise<Map<number, number>> {
  const metric = await registry.getSingleMetric('callgate_sip_setup_seconds')?.get();
  const buckets = new Map<number, number>();
  for (const value of metric?.values ?? []) {
    // prom-client lists _bucket, _sum and _count together; its types leave metricName out.
    const name = (value as { metricName?: string }).metricName;
    if (name !== 'callgate_sip_setup_seconds_bucket' || value.labels.driver !== 'builtin') continue;
    const le = value.labels.le === '+Inf' ? Infinity : Number(value.labels.le);
    buckets.set(le, value.value);
  }
  return buckets;
}

/** histogram_quantile over the difference of two bucket snapshots; milliseconds, with the bucket. */
function quantile(before: Map<number, number>, after: Map<number, number>, q: number): string {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total === 0) return '?';
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [i, le] of bounds.entries()) {
    const count = counts[i] ?? 0;
    if (count >= rank) {
      if (le === Infinity) return `>${(lower * 1000).toFixed(1)} ms`;
      const value = lower + (le - lower) * ((rank - below) / Math.max(1, count - below));
      return `${(value * 1000).toFixed(2)} ms (bucket ${(lower * 1000).toFixed(2)}-${(le * 1000).toFixed(2)})`;
    }
    lower = le;
    below = count;
  }
  return '?';
}

function sippRtts(dir: string): number[] {
  const file = readdirSync(dir).find((name) => name.includes('_rtt'));
  if (file === undefined) return [];
  return readFileSync(join(dir, file), 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => Number(line.split(';')[1]))
    .filter((value) => Number.isFinite(value))
    .sort((a, b) => a - b);
}

const percentile = (sorted: number[], p: number): string =>
  sorted.length === 0
    ? '?'
    : `${String(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0)} ms`;

/** One rate: a fresh driver, sipp until it exits, then the settle wait and the measurements. */
async function run(
  rate: number,
  runSeconds: number,
  expected: number,
  report = true,
): Promise<string> {
  const calls = expected;
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({
      listen: '127.0.0.1',
      udpPort: 0,
      transports: ['udp'],
      inviteRatePerSource: 100_000,
    }),
    tenants: [
      tenantSchema.parse({
        id: 'bench',
        numbers: ['100'],
        agent: 'bench',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
      }),
    ],
    // Warnings show: the kernel capping the receive buffer is one.
    logger: new Logger({ level: 'warn' }),
  });
  let port = 20_000;
  let offered = 0;
  let allOffered: () => void = () => undefined;
  const everyInviteIn = new Promise<void>((done) => (allOffered = done));
  driver.onCall((call) => {
    port = port >= 29_998 ? 20_000 : port + 2;
    call.accept({ local: { address: '127.0.0.1', port } });
    if (++offered === expected) allOffered();
  });
  await driver.start();
  const dir = mkdtempSync(join(tmpdir(), 'callgate-bench-'));
  const baseline = heap();
  const retransBefore = await counter('callgate_sip_retransmissions_total');
  const bucketsBefore = await setupBuckets();
  const cpuBefore = process.cpuUsage();
  const load = loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
  let peakDialogs = 0;
  const sampler = setInterval(() => {
    peakDialogs = Math.max(peakDialogs, driver.answeredCount());
  }, 100);
  const timeout = runSeconds + holdSeconds + 30;
  const child = spawn(
    'sipp',
    [
      `127.0.0.1:${driver.port('udp') ?? 0}`,
      '-sf',
      scenario,
      '-s',
      '100',
      '-i',
      '127.0.0.1',
      '-p',
      String(await freeLoopbackPort()),
      '-t',
      'u1',
      '-m',
      String(calls),
      '-r',
      String(rate),
      '-l',
      String(calls),
      '-d',
      String(holdSeconds * 1000),
      '-buff_size',
      String(SIPP_BUFFER_BYTES),
      '-recv_timeout',
      '20000',
      '-timeout',
      `${timeout}s`,
      '-timeout_error',
      '-nostdin',
      '-trace_stat',
      '-stf',
      join(dir, 'stats.csv'),
      '-trace_rtt',
      '-rtt_freq',
      '1',
    ],
    { cwd: dir, stdio: 'ignore' },
  );
  const guard = setTimeout(
    () => {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    },
    (timeout + 15) * 1000,
  );
  const exited = new Promise<void>((done) => child.on('close', () => done()));
  // Every call is up once the last INVITE is in: read the heap per dialog there, so the pause of a
  // full gc delays BYEs, never an INVITE being timed.
  const heldPeak = (async () => {
    await Promise.race([everyInviteIn, exited]);
    const dialogs = driver.answeredCount();
    return { dialogs, heap: heap() - baseline };
  })();
  await exited;
  clearTimeout(guard);
  clearInterval(sampler);
  const cpu = process.cpuUsage(cpuBefore);
  const peak = await heldPeak;
  const bucketsAfter = await setupBuckets();
  const retrans = (await counter('callgate_sip_retransmissions_total')) - retransBefore;
  const stats = readFileSync(join(dir, 'stats.csv'), 'utf8').trim().split('\n');
  const header = (stats[0] ?? '').split(';');
  const last = (stats[stats.length - 1] ?? '').split(';');
  const col = (name: string): number => Number(last[header.indexOf(name)] ?? NaN);
  const rtts = sippRtts(dir);
  rmSync(dir, { recursive: true, force: true });
  await sleep(settleSeconds * 1000);
  const after = heap() - baseline;
  const retained = driver.retainedState();
  const successful = col('SuccessfulCall(C)');
  const failed = col('FailedCall(C)');
  const result = {
    rate,
    calls,
    holdSeconds,
    loadAverage: load,
    udpReceiveBufferBytes: driver.udpReceiveBufferBytes(),
    successful,
    failed,
    inviteTo200: {
      gateway: {
        p50: quantile(bucketsBefore, bucketsAfter, 0.5),
        p99: quantile(bucketsBefore, bucketsAfter, 0.99),
      },
      caller: {
        p50: percentile(rtts, 50),
        p99: percentile(rtts, 99),
        max: percentile(rtts, 100),
        samples: rtts.length,
      },
    },
    retransmissions: { gateway: retrans, sipp: col('Retransmissions(C)') },
    peakDialogs,
    cpuMsPerCall: Number(((cpu.user + cpu.system) / 1000 / Math.max(1, successful)).toFixed(3)),
    heapPerDialogBytes: Math.round(peak.heap / Math.max(1, peak.dialogs)),
    heapAfterCallsEndBytes: after,
    retainedAfterSettle: retained,
  };
  if (report) console.log(JSON.stringify(result));
  const mb = (bytes: number): string => `${(bytes / 1_048_576).toFixed(2)} MB`;
  await driver.stop();
  return `| ${rate} | ${calls} | ${failed} | ${result.inviteTo200.caller.p50} / ${result.inviteTo200.caller.p99} | ${result.inviteTo200.gateway.p50.split(' (')[0] ?? ''} / ${result.inviteTo200.gateway.p99.split(' (')[0] ?? ''} | ${retrans} | ${peakDialogs} | ${result.cpuMsPerCall} ms | ${Math.round(result.heapPerDialogBytes / 1024)} KB | ${after >= 0 ? '+' : ''}${mb(after)} | ${load} |`;
}

// Warm-up, not reported: the first calls in a process leave compiled code behind (about 0.5 MB
// of heap), which would otherwise count as heap not given back by the first rate.
await run(100, 2, 200, false);
const rows: string[] = [];
for (const rate of rates) rows.push(await run(rate, seconds, rate * seconds));
console.log(
  '\n| calls/s | calls | failed | INVITE-to-200 p50/p99 (sipp) | p50/p99 (gateway histogram) | retransmissions (gateway) | most dialogs | CPU per call | heap per dialog | heap after the calls end | load average at start |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
