/**
 * Call admission against callgate as it runs (gateway/main.ts in a child process, the simulator,
 * sipp as the carrier): past gateway.maxCalls every INVITE gets 503 with Retry-After and no call
 * is answered and then dropped; a model that cannot be reached refuses calls rather than answer
 * them; a tenant past its own limit gets 486 while another tenant's calls are answered.
 *
 * sipp's scenario (uac-admission.xml) fails a call that is refused without Retry-After or that
 * gets a BYE from callgate while held, so "sipp failed 0" is "every refusal said when to retry,
 * and no answered call was dropped". The overload rate is what this 2-core machine generates
 * reliably next to the gateway (ADMISSION_RATE overrides it; bench/admission-bench.ts runs 300/s).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';

const SCRIPT = { name: 'call-admission', greeting: 'Hello.', fallback: 'Anything else?' };
/**
 * The product's default limit under a burst this machine's gateway cannot keep up with (most
 * refusals are then its event loop's), and a small limit under a rate it keeps up with, where
 * the refusals are the limit's.
 */
const LOADS = [
  {
    maxCalls: 200,
    rate: Number(process.env.ADMISSION_RATE ?? 100),
    seconds: Number(process.env.ADMISSION_SECONDS ?? 5),
    limitReached: false,
  },
  { maxCalls: 20, rate: 20, seconds: 3, limitReached: true },
] as const;
/** How long sipp holds an answered call before its BYE. */
const HOLD_MS = 3_000;

let callgate: CallgateProcess | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
});

/** Every sample of a metric in Prometheus text format, summed over the samples matching `labels`. */
function total(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const found = new Map<string, string>(
      [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']),
    );
    if (Object.entries(labels).every(([k, v]) => found.get(k) === v)) sum += Number(match[3]);
  }
  return sum;
}

/** The samples of a labelled counter, by the value of `label`. */
function byLabel(text: string, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${name}\\{[^}]*${label}="([^"]+)"[^}]*\\} (\\S+)$`).exec(line);
    if (match?.[1] !== undefined) out[match[1]] = (out[match[1]] ?? 0) + Number(match[2]);
  }
  return out;
}

async function metrics(cg: CallgateProcess): Promise<string> {
  return (await fetch(`${cg.httpUrl}/metrics`)).text();
}

/** Polls callgate's gauges while `during` runs: the most calls answered at once, the fewest free slots. */
async function watchLoad<T>(
  cg: CallgateProcess,
  during: Promise<T>,
): Promise<{ result: T; maxActive: number; minSlots: number; notReady: boolean }> {
  let maxActive = 0;
  let minSlots = Number.POSITIVE_INFINITY;
  let notReady = false;
  let running = true;
  const poll = (async () => {
    while (running) {
      const text = await metrics(cg).catch(() => '');
      if (text !== '') {
        maxActive = Math.max(maxActive, total(text, 'callgate_calls_active'));
        minSlots = Math.min(minSlots, total(text, 'callgate_call_slots_available'));
      }
      const ready = await fetch(`${cg.httpUrl}/readyz`).catch(() => undefined);
      if (ready !== undefined && ready.status !== 200) notReady = true;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const result = await during;
  running = false;
  await poll;
  return { result, maxActive, minSlots, notReady };
}

describe.each(LOADS)(
  'when callers arrive faster than the gateway may hold calls (maxCalls $maxCalls, $rate calls/s for $seconds s)',
  ({ maxCalls: MAX_CALLS, rate: RATE, seconds: SECONDS, limitReached }) => {
    it(
      `should answer at most ${MAX_CALLS} at once, refuse the rest with 503 and Retry-After, and drop none`,
      { timeout: 180_000 },
      async () => {
        const cg = await startCallgate({
          script: SCRIPT,
          overrides: (config) => {
            config.gateway = { ...(config.gateway as object), maxCalls: MAX_CALLS };
          },
        });
        callgate = cg;
        const calls = RATE * SECONDS;
        const { result, maxActive, minSlots, notReady } = await watchLoad(
          cg,
          runSipp({
            scenario: 'uac-admission.xml',
            port: cg.sipPort,
            transport: 'udp',
            service: '1000',
            calls,
            rate: RATE,
            limit: calls,
            pauseMs: HOLD_MS,
            timeoutSeconds: SECONDS + 60,
            trace: false,
          }),
        );
        const after = await metrics(cg);
        const answered = total(after, 'callgate_sip_calls_answered_total');
        const refused = byLabel(after, 'callgate_calls_refused_total', 'reason');
        const refusedCount = Object.values(refused).reduce((a, b) => a + b, 0);
        const summary = { calls, answered, refused, maxActive, minSlots, result: result.stdout };

        // Every call ended as sipp expected: answered and hung up by the caller, or refused with Retry-After.
        expect(result.failed, JSON.stringify(summary)).toBe(0);
        expect(result.successful).toBe(calls);
        expect(answered + refusedCount).toBe(calls);
        // The limit held, and the gateway refused rather than answer beyond it.
        expect(maxActive).toBeLessThanOrEqual(MAX_CALLS);
        expect(answered).toBeGreaterThan(0);
        expect(refusedCount).toBeGreaterThan(0);
        // Every refusal was a 503 (the tenant has no limit of its own): gateway full, loop late, or setup.
        expect(Object.keys(refused).every((r) => r !== 'tenant_full')).toBe(true);
        expect(total(after, 'callgate_sip_responses_total', { code: '503' })).toBe(refusedCount);
        // Zero answered then dropped: every answered call ended by the caller's BYE.
        expect(byLabel(after, 'callgate_calls_ended_total', 'reason')).toEqual({
          caller_hung_up: answered,
          ...(refused.setup_failed !== undefined || refused.setup_timeout !== undefined
            ? { rejected: (refused.setup_failed ?? 0) + (refused.setup_timeout ?? 0) }
            : {}),
        });
        // Full at some point (the probe said so, or the gauge read no free slot), and empty again.
        if (limitReached) expect(refused.gateway_full ?? 0).toBeGreaterThan(0);
        if (refused.gateway_full !== undefined) expect(notReady || minSlots === 0).toBe(true);
        expect(total(after, 'callgate_calls_active')).toBe(0);
        expect(total(after, 'callgate_call_slots_available')).toBe(MAX_CALLS);
        console.log(`admission e2e: ${JSON.stringify({ ...summary, result: undefined })}`);
      },
    );
  },
);

describe('when the model cannot be reached', () => {
  it(
    'should refuse each call with 503 and Retry-After, and answer none',
    { timeout: 90_000 },
    async () => {
      // The key variable only has to be set for callgate to use the provider; the URL goes nowhere.
      process.env.CALLGATE_TEST_UNREACHABLE_KEY = 'sk-unreachable';
      const closedPort = await freeLoopbackPort();
      const cg = await startCallgate({
        script: SCRIPT,
        overrides: (config) => {
          config.model = {
            provider: 'openai',
            openai: {
              url: `ws://127.0.0.1:${closedPort}/v1/realtime`,
              apiKeyEnv: 'CALLGATE_TEST_UNREACHABLE_KEY',
            },
          };
        },
      });
      callgate = cg;
      const result = await runSipp({
        scenario: 'uac-admission.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: '1000',
        calls: 5,
        rate: 5,
        limit: 5,
        timeoutSeconds: 30,
      });
      expect(result.failed, result.stderr).toBe(0);
      expect(result.successful).toBe(5);
      const refusals = result.firstLines.filter((line) => /^received SIP\/2\.0 503/.test(line));
      expect(refusals).toHaveLength(5);
      expect(result.firstLines.some((line) => /^received SIP\/2\.0 200/.test(line))).toBe(false);
      expect(result.trace).toMatch(/Retry-After: 5/);
      const after = await metrics(cg);
      expect(total(after, 'callgate_sip_calls_answered_total')).toBe(0);
      expect(total(after, 'callgate_calls_refused_total', { reason: 'setup_failed' })).toBe(5);
      expect(total(after, 'callgate_calls_active')).toBe(0);
    },
  );
});

describe('when one tenant is at its own limit', () => {
  it(
    'should refuse its next calls with 486 while another tenant is answered',
    { timeout: 90_000 },
    async () => {
      const cg = await startCallgate({
        script: SCRIPT,
        overrides: (config) => {
          const tenants = config.tenants as Record<string, unknown>[];
          const demo = tenants[0] ?? {};
          tenants[0] = { ...demo, maxCalls: 2 };
          tenants.push({ ...demo, id: 'other', name: 'Other', numbers: ['2000'] });
        },
      });
      callgate = cg;
      const run = (service: string, calls: number) =>
        runSipp({
          scenario: 'uac-admission.xml',
          port: cg.sipPort,
          transport: 'udp',
          service,
          calls,
          rate: 20,
          limit: calls,
          pauseMs: HOLD_MS,
          timeoutSeconds: 40,
        });
      const [limited, other] = await Promise.all([run('1000', 5), run('2000', 3)]);
      expect(limited.failed, limited.stderr).toBe(0);
      expect(other.failed, other.stderr).toBe(0);
      const statuses = (r: typeof limited) =>
        r.firstLines
          .filter((line) => /^received SIP\/2\.0 (200|486|503)/.test(line))
          .map((line) => line.split(' ')[2]);
      // The limited tenant: two answered (each 200 once, plus the 200 to its BYE), three busy.
      expect(statuses(limited).filter((s) => s === '486')).toHaveLength(3);
      expect(statuses(limited).filter((s) => s === '503')).toHaveLength(0);
      expect(statuses(other).filter((s) => s === '486' || s === '503')).toHaveLength(0);
      const after = await metrics(cg);
      expect(total(after, 'callgate_calls_refused_total', { reason: 'tenant_full' })).toBe(3);
      expect(total(after, 'callgate_call_setup_seconds_count', { tenant: 'demo' })).toBe(2);
      expect(total(after, 'callgate_call_setup_seconds_count', { tenant: 'other' })).toBe(3);
    },
  );
});
