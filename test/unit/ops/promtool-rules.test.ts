import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALERTS_FILE, ROOT } from './chart-files.ts';

/** promtool comes with the prometheus package (scripts/bootstrap.sh --test installs it). */
const PROMTOOL = process.env.PROMTOOL ?? 'promtool';

function promtool(...args: string[]): { status: number | null; output: string } {
  const result = spawnSync(PROMTOOL, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (result.error)
    throw new Error(
      `cannot run ${PROMTOOL} (install it with scripts/bootstrap.sh --test): ${result.error.message}`,
    );
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('when promtool checks the alert rules', () => {
  it('should accept helm/callgate/files/alerts.yaml', () => {
    const { status, output } = promtool('check', 'rules', ALERTS_FILE);
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(status, output).toBe(0);
  });

  it('should fire the UNKNOWN and reconciliation alerts exactly as the promtool unit tests expect', () => {
    const { status, output } = promtool(
      'test',
      'rules',
      join(ROOT, 'test/unit/ops/alerts.promtool-test.yaml'),
    );
    expect(status, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });
});
