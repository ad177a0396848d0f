/** `npm run check` says which tenants take calls from anyone, and whether SIP is public. */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { checkConfig, formatCheckReport } from '../../../gateway/check/config-check.ts';
import { EXAMPLE_CONFIG_PATH } from '../../../config/load.ts';

function exampleWith(change: (config: Record<string, Record<string, unknown>>) => void): string {
  const config = parse(readFileSync(EXAMPLE_CONFIG_PATH, 'utf8')) as Record<
    string,
    Record<string, unknown>
  >;
  change(config);
  const path = join(mkdtempSync(join(tmpdir(), 'callgate-check-')), 'callgate.yaml');
  writeFileSync(path, stringify(config));
  return path;
}

const openDemo = (config: Record<string, Record<string, unknown>>): void => {
  const tenants = config.tenants as unknown as Record<string, unknown>[];
  for (const tenant of tenants) tenant.trunk = { open: true };
};

describe('when a checked configuration has an open tenant', () => {
  it('should warn that it takes calls from anyone, on loopback', async () => {
    const report = await checkConfig(exampleWith(openDemo), { OPENAI_API_KEY: 'set' });
    if (!report.valid) throw new Error(report.problems.join('\n'));
    expect(report.warnings).toEqual([
      'tenants[0].trunk.open: demo takes calls from anyone; SIP listens on loopback only',
    ]);
    expect(formatCheckReport(report)).toContain('demo takes calls from anyone');
  });

  it('should say so louder when SIP listens beyond loopback', async () => {
    const path = exampleWith((config) => {
      openDemo(config);
      config.sip = { ...config.sip, listen: '0.0.0.0' };
    });
    const report = await checkConfig(path, { OPENAI_API_KEY: 'set' });
    if (!report.valid) throw new Error(report.problems.join('\n'));
    expect(report.warnings).toEqual([
      'tenants[0].trunk.open: demo takes calls from anyone; SIP is reachable beyond loopback, so any source that finds it is answered by an agent',
    ]);
  });
});
