/**
 * Drives the built-in stack with sipp at fixed call rates, calls held `--hold` seconds, over UDP on
 * loopback, and prints INVITE-to-200 p50/p99 (sipp's response times), failed calls, retransmissions,
 * CPU per call (gateway process only) and memory per dialog and after the calls end.
 * Usage: tsx bench/sip-bench.ts [--rates 100,300,1000] [--seconds 10] [--hold 10]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
const scenario = resolve(import.meta.dirname, '../test/fixtures/sipp/uac-caller-bye.xml');

const heap = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

async function counter(name: string): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  return (metric?.values ?? []).reduce((sum, value) => sum + value.value, 0);
}

for (const rate of rates) {
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'], inviteRatePerSource: 100_000 }),
    tenants: [tenantSchema.parse({ id: 'bench', numbers: ['100'], agent: 'bench' })],
    logger: new Logger({ level: 'error' }),
  });
  let port = 20_000;
  driver.onCall((call) => {
    port = port >= 29_998 ? 20_000 : port + 2;
    call.accept({ local: { address: '127.0.0.1', port } });
  });
  await driver.start();
  const calls = rate * seconds;
  const dir = mkdtempSync(join(tmpdir(), 'callgate-bench-'));
  const baseline = heap();
  const retransBefore = await counter('callgate_sip_retransmissions_total');
  const cpuBefore = process.cpuUsage();
  let peakDialogs = 0;
  let peakHeap = 0;
  const sampler = setInterval(() => {
    peakDialogs = Math.max(peakDialogs, driver.answeredCount());
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  }, 200);
  const child = spawn('sipp', [
    `127.0.0.1:${driver.port('udp') ?? 0}`, '-sf', scenario, '-s', '100', '-i', '127.0.0.1', '-p', String(await freeLoopbackPort()),
    '-t', 'u1', '-m', String(calls), '-r', String(rate), '-l', String(calls), '-d', String(holdSeconds * 1000),
    '-timeout', `${seconds + holdSeconds + 60}s`, '-nostdin', '-nr', '-trace_stat', '-stf', join(dir, 'stats.csv'), '-trace_rtt', '-rtt_freq', '1',
  ], { cwd: dir, stdio: 'ignore' });
  await new Promise((done) => child.on('close', done));
  clearInterval(sampler);
  const cpu = process.cpuUsage(cpuBefore);
  const after = heap();
  const retrans = (await counter('callgate_sip_retransmissions_total')) - retransBefore;
  const stats = readFileSync(join(dir, 'stats.csv'), 'utf8').trim().split('\n');
  const header = (stats[0] ?? '').split(';');
  const last = (stats[stats.length - 1] ?? '').split(';');
  const col = (name: string): string => last[header.indexOf(name)] ?? '?';
  const rttFile = readdirSync(dir).find((name) => name.includes('_rtt'));
  const rtts = rttFile === undefined ? [] : readFileSync(join(dir, rttFile), 'utf8').trim().split('\n').slice(1).map((line) => Number(line.split(';')[1])).filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const pct = (p: number): string => (rtts.length === 0 ? '?' : (rtts[Math.min(rtts.length - 1, Math.floor((p / 100) * rtts.length))] ?? 0).toFixed(2));
  const successful = Number(col('SuccessfulCall(C)'));
  console.log(JSON.stringify({
    rate, calls, holdSeconds, successful, failed: Number(col('FailedCall(C)')), inviteTo200Ms: { p50: pct(50), p99: pct(99) },
    retransmissions: retrans, peakDialogs, cpuMsPerCall: ((cpu.user + cpu.system) / 1000 / Math.max(1, successful)).toFixed(3),
    heapPerDialogBytes: Math.round((peakHeap - baseline) / Math.max(1, peakDialogs)), heapAfterMinusBeforeBytes: after - baseline,
  }));
  rmSync(dir, { recursive: true, force: true });
  await driver.stop();
}
