/**
 * The gateway as the product runs it (gateway/main.ts) and sipp on loopback: an INVITE from a
 * source outside the tenant's allowlist is answered 403, one for an unknown number 404, and
 * neither opens a model session (the test owns the realtime model, so it sees every session) nor
 * takes an RTP port (the gateway counts every RTP session it opens).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RealtimeSimulator } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { parseSimulatorScript } from '../../gateway/realtime/simulator/simulator-script.ts';
import { quietLog } from '../support/action-harness.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';
import { stringify } from 'yaml';

const SCRIPT = { name: 'e2e-trunk-refusal', greeting: 'Hello.', fallback: 'Anything else?' };
const MODEL_KEY_ENV = 'CALLGATE_E2E_TRUNK_MODEL_KEY';
/** sipp sends from 127.0.0.1; this tenant takes calls from 127.0.0.2 only. */
const CLOSED_NUMBER = '2000';
const UNKNOWN_NUMBER = '9999';
const ALLOWED_NUMBER = '1000';
const REFUSED_CALLS = 3;

let callgate: CallgateProcess | undefined;
let simulator: RealtimeSimulator | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
  await simulator?.stop();
  simulator = undefined;
  delete process.env[MODEL_KEY_ENV];
});

/** An even base in 40000-49990 with ten ports above it, away from the default range. */
function rtpRange(): { portMin: number; portMax: number } {
  const portMin = 40_000 + 10 * Math.floor(Math.random() * 999);
  return { portMin, portMax: portMin + 9 };
}

/** callgate_rtp_sessions_opened_total as the gateway's /metrics shows it. */
async function sessionsOpened(cg: CallgateProcess): Promise<number> {
  const text = await (await fetch(`${cg.httpUrl}/metrics`)).text();
  const line = /^callgate_rtp_sessions_opened_total (\d+)/m.exec(text);
  return Number(line?.[1] ?? NaN);
}

describe('when INVITEs come from a refused source or for an unknown number', () => {
  it(
    'should answer 403 and 404 without opening a model session or taking an RTP port',
    { timeout: 90_000 },
    async () => {
      const model = new RealtimeSimulator({
        script: parseSimulatorScript(stringify(SCRIPT)),
        speechSpeed: 0,
        logger: quietLog,
      });
      simulator = model;
      const url = await model.start();
      process.env[MODEL_KEY_ENV] = 'e2e-key';
      const rtp = rtpRange();
      callgate = await startCallgate({
        script: SCRIPT,
        overrides: (config) => {
          config.model = {
            provider: 'openai',
            openai: { url, model: 'gpt-realtime', voice: 'marin', apiKeyEnv: MODEL_KEY_ENV },
          };
          config.rtp = { ...(config.rtp as Record<string, unknown>), ...rtp };
          const tenants = config.tenants as Record<string, unknown>[];
          const demo = tenants[0] ?? {};
          demo.trunk = { allowFrom: ['127.0.0.1/32'] };
          tenants.push({
            ...structuredClone(demo),
            id: 'closed',
            numbers: [CLOSED_NUMBER],
            trunk: { allowFrom: ['127.0.0.2/32'] },
          });
        },
      });
      const cg = callgate;

      const refused = await runSipp({
        scenario: 'uac-rejected.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: CLOSED_NUMBER,
        calls: REFUSED_CALLS,
      });
      expect(refused.exitCode, refused.stderr).toBe(0);
      const finals = (result: typeof refused): string[] =>
        result.firstLines.filter((line) => /^received SIP\/2\.0 [2-6]/.test(line));
      expect(finals(refused)).toEqual(
        Array.from({ length: REFUSED_CALLS }, () => 'received SIP/2.0 403 Forbidden'),
      );

      const unknown = await runSipp({
        scenario: 'uac-rejected.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: UNKNOWN_NUMBER,
        calls: REFUSED_CALLS,
      });
      expect(unknown.exitCode, unknown.stderr).toBe(0);
      expect(finals(unknown)).toEqual(
        Array.from({ length: REFUSED_CALLS }, () => 'received SIP/2.0 404 Not Found'),
      );

      // The realtime model never heard of the refused calls, and none had a port pair bound.
      expect(model.connections).toHaveLength(0);
      expect(await sessionsOpened(cg)).toBe(0);

      const answered = await runSipp({
        scenario: 'uac-caller-bye.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: ALLOWED_NUMBER,
        pauseMs: 500,
      });
      expect(answered.exitCode, answered.stderr).toBe(0);
      const answer = /SIP\/2\.0 200 OK[\s\S]*?m=audio (\d+) /.exec(answered.trace);
      // A port of the range (drawn at random), and the one session the counter now shows.
      expect(Number(answer?.[1])).toBeGreaterThanOrEqual(rtp.portMin);
      expect(Number(answer?.[1])).toBeLessThanOrEqual(rtp.portMax);
      expect(await sessionsOpened(cg)).toBe(1);
      // And the one call answered opened the one session: the model is the gateway's.
      expect(model.connections).toHaveLength(1);
    },
  );
});
