/**
 * Reloading a configuration whose agents come from a TypeScript module: the module is imported
 * afresh, so an edited module gives new calls its new agents (a new version); one that throws on
 * import is refused and the running agents stay. Real files, the real loader.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentRelease, AgentReleases } from '../../../agents/agent-versions.ts';
import { reloadAgents } from '../../../gateway/call/agent-reload.ts';
import { callAgents } from '../../../gateway/call/start-call-gateway.ts';
import { loadConfig } from '../../../config/load.ts';
import { quietLog } from '../../support/action-harness.ts';

const CONFIG = `
providers: { records: { type: http, baseUrl: 'http://127.0.0.1:9', honoursIdempotencyKeys: true } }
tenants:
  - id: clinic
    numbers: ['2000']
    agent: front
    trunk: { allowFrom: [127.0.0.1/32] }
    notify: { outOfBand: false }
    actions: { book: { kind: mutation, provider: records } }
agents:
  module: ./agents.mjs
`;

function moduleSource(instructions: string): string {
  return `export const agents = [{
  name: 'front',
  instructions: ${JSON.stringify(instructions)},
  tools: [{ name: 'operation_status', control: 'operation_status' }],
  reveals: [],
}];
`;
}

describe('when a configuration whose agents are a module is reloaded', () => {
  it('should import the edited module afresh, and refuse one that throws', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-reload-'));
    const configPath = join(dir, 'callgate.yaml');
    const modulePath = join(dir, 'agents.mjs');
    writeFileSync(configPath, CONFIG);
    writeFileSync(modulePath, moduleSource('Answer for the clinic.'));
    const load = () => loadConfig({ path: configPath, env: {} });
    const running = load();
    const first = await callAgents(running, quietLog);
    expect(first.catalogue.get('front')?.instructions).toBe('Answer for the clinic.');
    const releases = new AgentReleases(agentRelease(running, first.catalogue));
    const held = releases.current;
    const options = {
      releases,
      running,
      load,
      compile: (config: typeof running) => callAgents(config, quietLog, { fresh: true }),
      log: quietLog,
    };

    writeFileSync(modulePath, moduleSource('Answer for the clinic, in French.'));
    const reloaded = await reloadAgents(options, 'test');
    expect(reloaded).toMatchObject({ status: 'reloaded', previous: held.version });
    expect(releases.current.catalogue.get('front')?.instructions).toBe(
      'Answer for the clinic, in French.',
    );
    // A call that started before keeps what it had.
    expect(held.catalogue.get('front')?.instructions).toBe('Answer for the clinic.');

    writeFileSync(modulePath, 'throw new Error("half-written");\n');
    const refused = await reloadAgents(options, 'test');
    expect(refused.status).toBe('refused');
    expect(refused.problems?.join('\n')).toContain('half-written');
    expect(releases.current.version).toBe(reloaded.version);
  });
});
