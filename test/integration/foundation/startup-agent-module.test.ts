/**
 * A gateway whose agent module is missing, throws or exports an invalid agent stops before it
 * starts anything, as for a bad configuration file: exit 2, every problem named with the module's
 * path, no stack trace.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../../jobs/redis/local-redis.ts';
import { freeSipPort } from '../../support/ports.ts';
import { startTs, type StartedProcess } from '../../support/processes.ts';

const started: StartedProcess[] = [];
afterEach(() => {
  for (const p of started.splice(0)) p.kill();
});

/** A configuration whose tenant is answered by an agent of `module` (written beside it). */
function configWithModule(module: string): { config: string; module: string } {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-module-config-'));
  const config = join(dir, 'callgate.yaml');
  writeFileSync(join(dir, 'agents.mjs'), module);
  writeFileSync(
    config,
    [
      'providers: { bookings: { type: sandbox, service: bookings } }',
      'tenants:',
      '  - id: clinic',
      '    numbers: ["7100"]',
      '    agent: clinic',
      "    trunk: { allowFrom: [127.0.0.0/8, '::1/128'] }",
      '    actions: { book_table: { kind: mutation, provider: bookings, operation: book } }',
      'agents: { module: ./agents.mjs }',
    ].join('\n'),
  );
  return { config, module: join(dir, 'agents.mjs') };
}

async function startGateway(config: string): Promise<StartedProcess> {
  const proc = startTs('gateway/main.ts', {
    env: {
      CALLGATE_CONFIG: config,
      CALLGATE_HTTP_PORT: String(await freeLoopbackPort()),
      CALLGATE__http__operator__port: '0',
      CALLGATE_SIP_PORT: String(await freeSipPort()),
      CALLGATE_SIP_TCP_PORT: String(await freeSipPort()),
      REDIS_URL: '',
    },
  });
  started.push(proc);
  return proc;
}

describe('when the agent module cannot be used', () => {
  it('should exit 2 naming the module when it throws on import', async () => {
    const paths = configWithModule("throw new Error('CLINIC_API_URL is not set');\n");
    const proc = await startGateway(paths.config);
    expect(await proc.exited, proc.output()).toBe(2);
    expect(proc.stderr()).toContain(
      `agents.module (${paths.module}): importing it failed: CLINIC_API_URL is not set`,
    );
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
  });

  it('should exit 2 listing every problem of an invalid agent by path', async () => {
    const paths = configWithModule(
      "export const agents = [{ name: 'clinic', tools: [{ name: 'book visit', action: 'book_table' }] }];\n",
    );
    const proc = await startGateway(paths.config);
    expect(await proc.exited, proc.output()).toBe(2);
    const stderr = proc.stderr();
    expect(stderr).toContain(
      `agents.module (${paths.module}): agents[0].tools[0].name: must use only letters, digits, _ and - (at most 64)`,
    );
    expect(stderr).toContain(
      `agents.module (${paths.module}): agents[0].instructions: must be set`,
    );
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
