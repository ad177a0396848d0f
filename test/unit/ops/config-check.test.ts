import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentCatalogue } from '../../../agents/agent-config.ts';
import { checkConfig, formatCheckReport } from '../../../gateway/check/config-check.ts';
import { toolToWire } from '../../../gateway/realtime/session-config-wire.ts';
import { EXAMPLE_CONFIG_PATH, loadConfig } from '../../../config/load.ts';

describe('when a configuration is checked without starting anything', () => {
  it('should list the tools of each agent exactly as they go to the model', async () => {
    const report = await checkConfig(EXAMPLE_CONFIG_PATH, { OPENAI_API_KEY: 'set' });
    if (!report.valid) throw new Error(report.problems.join('\n'));
    const catalogue = agentCatalogue(loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} }));
    const billing = report.agents.find((a) => a.name === 'billing');
    expect(billing?.tools).toEqual(catalogue.get('billing')?.tools.map((t) => toolToWire(t)));
    expect(report.agents.find((a) => a.name === 'concierge')?.entryOf).toEqual(['demo']);
    expect(report.warnings).toEqual([]);
    expect(formatCheckReport(report)).toContain(`is valid (agents version ${report.agentVersion})`);
  });

  it('should list every problem by path, and warn of secrets not set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-check-'));
    const path = join(dir, 'bad.yaml');
    writeFileSync(
      path,
      [
        'tenants: [{ id: x, numbers: ["1"], agent: front, trunk: { open: true } }]',
        'agents:',
        '  tools:',
        '    - { name: t, description: d, action: a, parameters: { type: object, properties: { n: { type: string, if: {} } } } }',
        '  list:',
        '    - { name: front, instructions: hi, tools: [t, missing_tool], reveals: [], handoffs: [{ agent: ghost, description: g }] }',
      ].join('\n'),
    );
    const report = await checkConfig(path, {});
    expect(report.valid).toBe(false);
    if (report.valid) return;
    const text = report.problems.join('\n');
    expect(text).toContain('agents.tools[0].parameters.properties.n.if');
    expect(text).toContain('ghost');
    expect(text).toContain('missing_tool');
    expect(formatCheckReport(report)).toContain('is not valid');

    const ok = await checkConfig(EXAMPLE_CONFIG_PATH, {});
    expect(ok.valid && ok.warnings).toEqual([
      'model.openai.apiKeyEnv: names OPENAI_API_KEY, which is not set here (the local simulator answers instead)',
    ]);
  });
});
