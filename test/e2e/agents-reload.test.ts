/**
 * Reloading agents without dropping calls, in the product's own process: call A starts on the
 * running agents; the configuration then takes book_table away from the reservations agent and is
 * reloaded through the operator API; call B, started after, runs the new agents while A keeps its
 * own: A's booking is admitted under A's version, B's is refused as an unknown tool. An invalid
 * configuration is refused with its problems and changes nothing; SIGHUP reloads too.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { CallerRtp } from './caller-rtp.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp, type SippResult } from './sipp-runner.ts';

const SCRIPT = {
  name: 'e2e-reload',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'sushi-kaito',
            date: '2031-06-02',
            time: '20:00',
            party_size: 2,
            name: 'Grace Hopper',
          },
        },
      ],
    },
  },
  toolOutputs: { default: 'Noted.' },
  systemMessage: 'Done.',
};

interface CallView {
  readonly session_id: string;
  readonly agent_version?: string;
}
interface ReloadView {
  readonly status: string;
  readonly version: string;
  readonly previous?: string;
  readonly problems?: readonly string[];
}
interface Agent {
  name: string;
  tools: string[];
  handoffs: { agent: string; description: string }[];
}
interface ConfigDoc {
  agents: { list: Agent[] };
}

let callgate: CallgateProcess | undefined;
const phones: CallerRtp[] = [];
afterEach(async () => {
  for (const phone of phones.splice(0)) phone.close();
  await callgate?.stop();
});

async function dial(
  cg: CallgateProcess,
  known: readonly string[],
): Promise<{ rtp: CallerRtp; sipp: Promise<SippResult>; call: CallView }> {
  const rtp = await CallerRtp.open();
  phones.push(rtp);
  const sipp = runSipp({
    scenario: 'uac-call-external-rtp.xml',
    port: cg.sipPort,
    transport: 'udp',
    service: '1000',
    pauseMs: 14_000,
    timeoutSeconds: 40,
    extraArgs: ['-set', 'rtp_port', String(rtp.port)],
  });
  const call = await waitFor(
    async () =>
      (await cg.get<{ active: CallView[] }>('/v1/calls')).active.find(
        (c) => !known.includes(c.session_id),
      ),
    10_000,
    'the new call',
  );
  await waitFor(async () => (rtp.audibleSince(0) >= 10 ? true : undefined), 10_000, 'greeting');
  return { rtp, sipp, call };
}

async function reload(cg: CallgateProcess): Promise<{ status: number; body: ReloadView }> {
  const response = await cg.operatorFetch('/v1/admin/reload', { method: 'POST' });
  return { status: response.status, body: (await response.json()) as ReloadView };
}

function toolAnswers(cg: CallgateProcess, sessionId: string) {
  return async () =>
    (await cg.timeline(sessionId))
      .filter((e) => e.type === 'tool_answered' && e.detail.tool === 'book_table')
      .map((e) => ({ status: e.detail.status, operationId: e.detail.operationId }));
}

describe('when the agents are reloaded while a call is in progress', () => {
  it(
    'should give new calls the new agents, keep the call in progress on its own, and refuse an invalid reload',
    { timeout: 120_000 },
    async () => {
      const cg = (callgate = await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      const path = cg.shared.configPath;
      const original = readFileSync(path, 'utf8');

      const a = await dial(cg, []);
      const v1 = a.call.agent_version;
      expect(v1).toMatch(/^av_[0-9a-f]{12}$/);

      // The reservations agent no longer books.
      const doc = parse(original) as ConfigDoc;
      const reservations = doc.agents.list.find((agent) => agent.name === 'reservations');
      if (reservations === undefined) throw new Error('no reservations agent in the example');
      reservations.tools = reservations.tools.filter((tool) => tool !== 'book_table');
      writeFileSync(path, stringify(doc));
      const reloaded = await reload(cg);
      expect(reloaded).toMatchObject({ status: 200, body: { status: 'reloaded', previous: v1 } });
      const v2 = reloaded.body.version;
      expect(v2).not.toBe(v1);

      const b = await dial(cg, [a.call.session_id]);
      expect(b.call.agent_version).toBe(v2);
      a.rtp.press('1');
      b.rtp.press('1');
      const answersA = await waitFor(
        async () =>
          (await toolAnswers(cg, a.call.session_id)()).length > 0
            ? await toolAnswers(cg, a.call.session_id)()
            : undefined,
        15_000,
        "call A's booking answered",
      );
      const answersB = await waitFor(
        async () =>
          (await toolAnswers(cg, b.call.session_id)()).length > 0
            ? await toolAnswers(cg, b.call.session_id)()
            : undefined,
        15_000,
        "call B's booking answered",
      );
      expect(answersA).toEqual([{ status: 'started', operationId: expect.any(String) as unknown }]);
      expect(answersB).toEqual([{ status: 'error', operationId: undefined }]);
      const opA = await cg.get<{ operation: { agent_version?: string } }>(
        `/v1/operations/${String(answersA[0]?.operationId)}`,
      );
      expect(opA.operation.agent_version).toBe(v1);
      expect(await cg.operations(b.call.session_id)).toEqual([]);

      // An invalid configuration: refused with its problem, and new calls keep v2.
      const broken = parse(stringify(doc)) as ConfigDoc;
      broken.agents.list[0]?.handoffs.push({ agent: 'nobody_here', description: 'gone' });
      writeFileSync(path, stringify(broken));
      const refused = await reload(cg);
      expect(refused.status).toBe(422);
      expect(refused.body).toMatchObject({ status: 'refused', version: v2 });
      expect(refused.body.problems?.join('\n')).toContain('nobody_here');

      // SIGHUP reloads the file as it is now: the original agents again (v1 by content).
      writeFileSync(path, original);
      cg.proc.child.kill('SIGHUP');
      await waitFor(
        async () =>
          cg.proc.stdout().includes('"msg":"agents reloaded for new calls"') &&
          cg.proc.stdout().includes(`"version":"${String(v1)}"`)
            ? true
            : undefined,
        5_000,
        'the SIGHUP reload',
      );
      const c = await dial(cg, [a.call.session_id, b.call.session_id]);
      expect(c.call.agent_version).toBe(v1);

      for (const call of [a, b, c]) {
        const result = await call.sipp;
        call.rtp.mute();
        expect(result.exitCode, result.stderr).toBe(0);
      }
    },
  );
});
