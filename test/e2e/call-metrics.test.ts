/**
 * The call metrics an operator graphs, read from callgate's /metrics as Prometheus scrapes them:
 * the active-calls gauge follows the call, and its end is counted once by its reason, with the
 * setup time (INVITE to answer), the time to a ready model and the call's duration.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { CallerRtp } from './caller-rtp.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';

const SCRIPT = { name: 'call-metrics', greeting: 'Hello.', fallback: 'Anything else?' };

let callgate: CallgateProcess | undefined;
let caller: CallerRtp | undefined;
afterEach(async () => {
  caller?.close();
  caller = undefined;
  await callgate?.stop();
  callgate = undefined;
});

/** The value of one sample in Prometheus text format (0 when absent). */
function sample(text: string, name: string, labels = ''): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}${labels === '' ? ' ' : `{${labels}} `}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('when a call is answered and the caller hangs up', () => {
  it(
    'should show it as active while it lasts, then count one caller hang-up with its setup time and duration',
    { timeout: 60_000 },
    async () => {
      const cg = await startCallgate({ script: SCRIPT, agent: 'reservations' });
      callgate = cg;
      const metrics = async (): Promise<string> => (await fetch(`${cg.httpUrl}/metrics`)).text();
      expect(sample(await metrics(), 'callgate_calls_active', 'tenant="demo"')).toBe(0);
      const rtp = await CallerRtp.open();
      caller = rtp;
      const sipp = runSipp({
        scenario: 'uac-call-external-rtp.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: '1000',
        pauseMs: 3_000,
        timeoutSeconds: 20,
        extraArgs: ['-set', 'rtp_port', String(rtp.port)],
      });
      await waitFor(
        async () => (rtp.audibleSince(0) >= 10 ? true : undefined),
        10_000,
        'the greeting',
      );
      const call = await cg.activeCall();
      const during = await metrics();
      expect(sample(during, 'callgate_calls_active', 'tenant="demo"')).toBe(1);
      expect(sample(during, 'callgate_call_setup_seconds_count', 'tenant="demo"')).toBe(1);
      expect(sample(during, 'callgate_call_model_ready_seconds_count', 'tenant="demo"')).toBe(1);
      expect(
        sample(during, 'callgate_calls_ended_total', 'tenant="demo",reason="caller_hung_up"'),
      ).toBe(0);

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      const after = await waitFor(
        async () => {
          const text = await metrics();
          return sample(
            text,
            'callgate_calls_ended_total',
            'tenant="demo",reason="caller_hung_up"',
          ) === 1
            ? text
            : undefined;
        },
        5_000,
        'the end of the call to be counted',
      );
      expect(sample(after, 'callgate_calls_active', 'tenant="demo"')).toBe(0);
      // Answered on loopback within the first bucket that holds it: well under a second.
      expect(sample(after, 'callgate_call_setup_seconds_bucket', 'le="1",tenant="demo"')).toBe(1);
      expect(sample(after, 'callgate_call_duration_seconds_count', 'reason="caller_hung_up"')).toBe(
        1,
      );
      // Held 3 s by the caller: counted in the 5 s bucket, not the 1 s one.
      expect(
        sample(after, 'callgate_call_duration_seconds_bucket', 'le="1",reason="caller_hung_up"'),
      ).toBe(0);
      expect(
        sample(after, 'callgate_call_duration_seconds_bucket', 'le="5",reason="caller_hung_up"'),
      ).toBe(1);
      expect(
        after
          .split('\n')
          .filter((l) => l.startsWith('callgate_calls_ended_total{'))
          .map((l) => l.slice(l.lastIndexOf(' ') + 1)),
      ).toEqual(['1']);

      // Scraped as OpenMetrics (as Prometheus does when it keeps exemplars): the call's histograms
      // lead to the call itself through its session id.
      const response = await fetch(`${cg.httpUrl}/metrics`, {
        headers: {
          accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5',
        },
      });
      expect(response.headers.get('content-type')).toMatch(
        /^application\/openmetrics-text; version=1\.0\.0/,
      );
      const open = (await response.text()).split('\n');
      expect(open.at(-2)).toBe('# EOF');
      expect(open).toContain('# TYPE callgate_calls_ended counter');
      const exemplar = ` # {session_id="${call.session_id}"} `;
      for (const [family, labels] of [
        ['callgate_call_setup_seconds', 'tenant="demo"'],
        ['callgate_call_model_ready_seconds', 'tenant="demo"'],
        ['callgate_call_duration_seconds', 'reason="caller_hung_up"'],
      ] as const) {
        const buckets = open.filter((l) => l.startsWith(`${family}_bucket{`) && l.includes(labels));
        expect(
          buckets.filter((l) => l.includes(exemplar)),
          `${family} has one bucket with the call's exemplar`,
        ).toHaveLength(1);
      }
    },
  );
});
