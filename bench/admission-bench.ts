/**
 * Call admission under a burst, as issue 20 measured the gateway without it: a fresh callgate as
 * `npm start` runs it (private Redis, workers, the local simulator) with gateway.maxCalls, and
 * sipp offering `--rate` calls/s for `--seconds` s (test/fixtures/sipp/uac-admission.xml: INVITE,
 * 180, then 200 -> ACK -> hold `--hold` s -> BYE from sipp, or 503 that must carry Retry-After, or
 * 486). A BYE from callgate while a call is held fails that call in sipp: "answered then dropped".
 *
 * Prints the rate sipp reached, answered calls, refusals by reason, the most calls active at once
 * (callgate_calls_active polled every 100 ms), the fewest free slots, sipp's failed calls, and the
 * calls callgate ended other than by the caller's BYE.
 *
 * Usage: flock /tmp/callgate-bench.lock npx tsx bench/admission-bench.ts [--rate 300]
 *        [--seconds 10] [--max-calls 200] [--hold 3]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFreshCallgate } from '../gateway/demo/demo-callgate.ts';
import { freeLoopbackPort } from '../jobs/redis/local-redis.ts';

const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const rate = Number(arg('rate', '300'));
const seconds = Number(arg('seconds', '10'));
const maxCalls = Number(arg('max-calls', '200'));
const holdMs = Number(arg('hold', '3')) * 1000;
const calls = rate * seconds;
const FIXTURE = new URL('../test/fixtures/sipp/uac-admission.xml', import.meta.url).pathname;

/** Sums the samples of `name` whose labels contain every `labels` pair, by the value of `by`. */
function samples(text: string, name: string, by?: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const key =
      by === undefined ? '' : (new RegExp(`${by}="([^"]*)"`).exec(match[2] ?? '')?.[1] ?? '');
    out[key] = (out[key] ?? 0) + Number(match[3]);
  }
  return out;
}
const sum = (values: Record<string, number>): number =>
  Object.values(values).reduce((a, b) => a + b, 0);

async function runSipp(port: number): Promise<{ successful: number; failed: number; ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-admission-'));
  const started = Date.now();
  const child = spawn(
    'sipp',
    [
      `127.0.0.1:${port}`,
      ...['-sf', FIXTURE, '-s', '1000', '-i', '127.0.0.1'],
      ...['-p', String(await freeLoopbackPort()), '-mp', String(await freeLoopbackPort())],
      ...['-m', String(calls), '-r', String(rate), '-l', String(calls), '-d', String(holdMs)],
      ...['-timeout', `${seconds + 60}s`, '-timeout_error', '-nostdin', '-nr'],
      ...['-trace_stat', '-stf', join(dir, 'stats.csv')],
    ],
    { cwd: dir, stdio: 'ignore' },
  );
  const guard = setTimeout(() => child.kill('SIGKILL'), (seconds + 80) * 1000);
  await new Promise((resolve) => child.on('close', resolve));
  clearTimeout(guard);
  const file = readdirSync(dir).find((name) => name.endsWith('.csv'));
  const lines = file === undefined ? [] : readFileSync(join(dir, file), 'utf8').trim().split('\n');
  rmSync(dir, { recursive: true, force: true });
  const header = (lines[0] ?? '').split(';');
  const last = (lines.at(-1) ?? '').split(';');
  const column = (name: string): number => Number(last[header.indexOf(name)] ?? -1);
  return {
    successful: column('SuccessfulCall(C)'),
    failed: column('FailedCall(C)'),
    ms: Date.now() - started,
  };
}

const callgate = await startFreshCallgate({
  overrides: { CALLGATE__gateway__maxCalls: String(maxCalls) },
});
try {
  let maxActive = 0;
  let minSlots = Number.POSITIVE_INFINITY;
  let running = true;
  const poll = (async () => {
    while (running) {
      const text = await (await fetch(`${callgate.httpUrl}/metrics`)).text().catch(() => '');
      if (text !== '') {
        maxActive = Math.max(maxActive, sum(samples(text, 'callgate_calls_active')));
        minSlots = Math.min(minSlots, sum(samples(text, 'callgate_call_slots_available')));
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const sipp = await runSipp(callgate.sipPort);
  running = false;
  await poll;
  const text = await (await fetch(`${callgate.httpUrl}/metrics`)).text();
  const ended = samples(text, 'callgate_calls_ended_total', 'reason');
  const refused = samples(text, 'callgate_calls_refused_total', 'reason');
  const answered = sum(samples(text, 'callgate_sip_calls_answered_total'));
  const notByCaller = sum(ended) - (ended.caller_hung_up ?? 0) - (ended.rejected ?? 0);
  console.log(
    JSON.stringify(
      {
        offered: calls,
        rate,
        seconds,
        maxCalls,
        holdMs,
        // sipp's whole run, including the last calls' hold: the offered rate is what -r reached.
        sippRunMs: sipp.ms,
        answered,
        refused,
        refusedTotal: sum(refused),
        maxActiveAtOnce: maxActive,
        minSlotsAvailable: minSlots,
        sippSuccessful: sipp.successful,
        sippFailed: sipp.failed,
        answeredThenEndedByCallgate: notByCaller,
        ended,
      },
      null,
      2,
    ),
  );
} finally {
  await callgate.stop();
}
