import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../../jobs/redis/local-redis.ts';
import { freeSipPort } from '../../support/ports.ts';
import { isAlive, startTs, waitFor, type StartedProcess } from '../../support/processes.ts';
import { testRedisUrl } from '../../support/redis.ts';

const started: StartedProcess[] = [];
afterEach(() => {
  for (const p of started.splice(0)) p.kill();
});

async function freePorts(): Promise<NodeJS.ProcessEnv> {
  return {
    CALLGATE_HTTP_PORT: String(await freeLoopbackPort()),
    CALLGATE__http__operator__port: '0',
    CALLGATE_SIP_PORT: String(await freeSipPort()),
    CALLGATE_SIP_TCP_PORT: String(await freeSipPort()),
    CALLGATE_CONFIG: '',
    REDIS_URL: '',
  };
}

async function get(
  port: string | undefined,
  path: string,
): Promise<{ status: number; text: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, text: await response.text() };
}

describe('when callgate starts on its embedded defaults', () => {
  it('should serve /healthz and /readyz, list callgate_ metrics, and exit 0 on SIGTERM leaving no redis-server', async () => {
    const env = await freePorts();
    const proc = startTs('gateway/main.ts', { env });
    started.push(proc);
    // How fast it starts is not judged here (a loaded machine starts it slower): only that it does.
    await waitFor(
      async () =>
        (await get(env.CALLGATE_HTTP_PORT, '/readyz')).status === 200 ? true : undefined,
      30_000,
      '/readyz 200',
    );
    expect((await get(env.CALLGATE_HTTP_PORT, '/healthz')).status).toBe(200);
    const metrics = await get(env.CALLGATE_HTTP_PORT, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^callgate_process_cpu_seconds_total /m);
    expect(metrics.text).toMatch(/^callgate_build_info\{/m);

    const redisLine = proc
      .stdout()
      .split('\n')
      .find((line) => line.includes('started a private redis-server'));
    expect(redisLine, proc.output()).toBeDefined();
    const redisPid = (JSON.parse(redisLine ?? '{}') as { pid: number }).pid;
    expect(isAlive(redisPid)).toBe(true);

    proc.child.kill('SIGTERM');
    const code = await proc.exited;
    expect(code).toBe(0);
    await waitFor(
      async () => (isAlive(redisPid) ? undefined : true),
      5_000,
      'redis-server to exit',
    );
    // Every log line is one JSON object.
    for (const line of proc.stdout().trim().split('\n'))
      expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('should use REDIS_URL when it is set and start no redis-server of its own', async () => {
    const env: NodeJS.ProcessEnv = { ...(await freePorts()), REDIS_URL: testRedisUrl() };
    const proc = startTs('gateway/main.ts', { env });
    started.push(proc);
    await waitFor(
      async () =>
        (await get(env.CALLGATE_HTTP_PORT, '/readyz')).status === 200 ? true : undefined,
      // Not a startup-time claim (the test above makes that one): room for a loaded machine.
      20_000,
      '/readyz 200',
    );
    expect(proc.stdout()).not.toContain('started a private redis-server');
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  });
  it('should not be ready before its gateway started, and exit 0 on a SIGTERM during startup', async () => {
    const env: NodeJS.ProcessEnv = { ...(await freePorts()), REDIS_URL: testRedisUrl() };
    const proc = startTs('gateway/main.ts', { env });
    started.push(proc);
    await waitFor(
      async () => (proc.stdout().includes('http listening') ? true : undefined),
      20_000,
      'http listening',
    );
    const early = await get(env.CALLGATE_HTTP_PORT, '/readyz').catch(() => undefined);
    // Either still starting (503 naming the startup check) or already fully started.
    if (early?.status === 200) expect(proc.stdout()).toContain('callgate ready');
    else if (early !== undefined) expect(early.text).toContain('starting');
    proc.child.kill('SIGTERM');
    expect(await proc.exited, proc.output()).toBe(0);
  });
});

describe('when callgate cannot start', () => {
  it('should exit 2 and name every bad path of a bad config, without a stack trace', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-config-'));
    const path = join(dir, 'bad.yaml');
    writeFileSync(
      path,
      [
        'http: { port: 70000 }',
        'providers: { payments: { type: sandbox, service: payments } }',
        'tenants:',
        '  - { id: a, numbers: ["1000"], agent: concierge, trunk: { open: true } }',
        '  - id: b',
        '    numbers: ["1000"]',
        '    agent: billing',
        '    trunk: { open: true }',
        '    actions:',
        '      refund: { kind: mutation, provider: payments, policy: coalesce }',
      ].join('\n'),
    );
    const proc = startTs('gateway/main.ts', {
      env: { ...(await freePorts()), CALLGATE_CONFIG: path, CALLGATE_HTTP_PORT: '' },
    });
    started.push(proc);
    expect(await proc.exited).toBe(2);
    const stderr = proc.stderr();
    expect(stderr).toContain('http.port:');
    expect(stderr).toContain('tenants[1].numbers[0]: number 1000 is already owned by tenants[0]');
    expect(stderr).toContain(
      'tenants[1].actions.refund.policy: coalesce is only allowed for read actions',
    );
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  it('should exit 2 when the gateway has no agent for a tenant, and leave no redis-server', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-config-'));
    const path = join(dir, 'no-agents.yaml');
    writeFileSync(
      path,
      'tenants:\n  - { id: clinic, numbers: ["2000"], agent: front_desk, trunk: { open: true } }\n',
    );
    const proc = startTs('gateway/main.ts', {
      env: { ...(await freePorts()), CALLGATE_CONFIG: path },
    });
    started.push(proc);
    expect(await proc.exited, proc.output()).toBe(2);
    expect(proc.stderr()).toContain(
      'tenants[0].agent: unknown agent front_desk (the configuration has no agents section)',
    );
    const redisLine = proc
      .stdout()
      .split('\n')
      .find((line) => line.includes('started a private redis-server'));
    const redisPid = (JSON.parse(redisLine ?? '{}') as { pid?: number }).pid;
    if (redisPid !== undefined)
      await waitFor(
        async () => (isAlive(redisPid) ? undefined : true),
        5_000,
        'redis-server to exit',
      );
  });

  it('should exit non-zero naming an unreachable REDIS_URL without its password, not hang', async () => {
    const deadPort = await freeLoopbackPort();
    const proc = startTs('gateway/main.ts', {
      env: { ...(await freePorts()), REDIS_URL: `redis://:hunter22secret@127.0.0.1:${deadPort}` },
    });
    started.push(proc);
    const code = await Promise.race([
      proc.exited,
      new Promise((resolve) => setTimeout(() => resolve('hung'), 15_000)),
    ]);
    expect(code).toBe(1);
    expect(proc.stderr()).toContain(
      `CALLGATE_ERR_REDIS_UNREACHABLE: Redis at redis://:***@127.0.0.1:${deadPort} is unreachable`,
    );
    expect(proc.output()).not.toContain('hunter22secret');
  });

  it('should say how to install redis-server when it is missing and REDIS_URL is unset', async () => {
    const emptyPath = mkdtempSync(join(tmpdir(), 'callgate-path-'));
    const proc = startTs('gateway/main.ts', { env: { ...(await freePorts()), PATH: emptyPath } });
    started.push(proc);
    expect(await proc.exited).toBe(1);
    expect(proc.stderr()).toContain('apt-get install -y redis-server');
  });
});
