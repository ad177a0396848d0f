import { spawn } from 'node:child_process';
import { existsSync, readlinkSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { checkRedis, safeRedisUrl } from '../../../jobs/redis/connection.ts';
import {
  findRedisServer,
  freeLoopbackPort,
  resolveRedis,
  startLocalRedis,
} from '../../../jobs/redis/local-redis.ts';
import { isAlive, REPO_ROOT } from '../../support/processes.ts';
import { testRedisUrl } from '../../support/redis.ts';

/**
 * The directory a redis-server runs in (it changes into its `--dir`): other tests on the machine
 * start their own local servers meanwhile, so a listing of new directories is not this one's.
 */
function redisDirOf(pid: number): string {
  const dir = readlinkSync(`/proc/${pid}/cwd`);
  expect(basename(dir)).toMatch(/^callgate-redis-/);
  expect(dirname(dir)).toBe(tmpdir());
  return dir;
}

describe('when no REDIS_URL is given', () => {
  it('should start a private redis-server on loopback with noeviction, and remove it and its directory on stop', async () => {
    const local = await startLocalRedis();
    const dir = redisDirOf(local.pid);
    expect(existsSync(dir)).toBe(true);
    expect(local.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    const client = new Redis(local.url);
    try {
      expect(await client.ping()).toBe('PONG');
      expect(await client.config('GET', 'maxmemory-policy')).toEqual([
        'maxmemory-policy',
        'noeviction',
      ]);
      expect(await client.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);
    } finally {
      client.disconnect();
    }
    await local.stop();
    expect(isAlive(local.pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });

  it('should leave no redis-server and no directory behind when the process that started it is killed with SIGKILL', async () => {
    const program = [
      "import { startLocalRedis } from './jobs/redis/local-redis.ts';",
      'const local = await startLocalRedis();',
      'console.log(JSON.stringify({ pid: local.pid, url: local.url }));',
      'setInterval(() => undefined, 1000);',
    ].join('\n');
    const owner = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', program],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const started = await new Promise<{ pid: number; url: string }>((resolve, reject) => {
      let out = '';
      owner.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line !== undefined) resolve(JSON.parse(line) as { pid: number; url: string });
      });
      owner.once('exit', (code) =>
        reject(new Error(`exited with ${String(code)} before starting redis`)),
      );
    });
    const dir = redisDirOf(started.pid);
    expect(existsSync(dir)).toBe(true);
    expect(isAlive(started.pid)).toBe(true);

    owner.kill('SIGKILL');
    const deadline = Date.now() + 5_000;
    while ((isAlive(started.pid) || existsSync(dir)) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(isAlive(started.pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await expect(checkRedis(started.url, 500)).rejects.toThrow(/unreachable|ECONNREFUSED/i);
  });

  it('should keep serving when a signal reaches the whole process group of callgate (Ctrl-C), until callgate stops it', async () => {
    // The owner drains for a second after SIGINT, using Redis, then stops it: as callgate does.
    const program = [
      "import { Redis } from 'ioredis';",
      "import { startLocalRedis } from './jobs/redis/local-redis.ts';",
      'const local = await startLocalRedis();',
      'const client = new Redis(local.url);',
      "process.on('SIGINT', async () => {",
      '  await new Promise((resolve) => setTimeout(resolve, 1000));',
      '  const pong = await client.ping().catch((error) => String(error));',
      '  console.log(JSON.stringify({ drained: pong }));',
      '  client.disconnect();',
      '  await local.stop();',
      '  process.exit(0);',
      '});',
      'console.log(JSON.stringify({ pid: local.pid, url: local.url }));',
      'setInterval(() => undefined, 1000);',
    ].join('\n');
    // Its own group, like a shell job: the test sends the terminal's signal to that group.
    const owner = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', program],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], detached: true },
    );
    let out = '';
    owner.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const lines = () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { pid?: number; url?: string; drained?: string });
    const exited = new Promise<number | null>((resolve) =>
      owner.once('exit', (code) => resolve(code)),
    );
    try {
      const deadline = Date.now() + 15_000;
      while (lines().length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const started = lines()[0];
      expect(started?.pid).toBeGreaterThan(0);
      process.kill(-(owner.pid ?? 0), 'SIGINT');
      expect(await exited).toBe(0);
      expect(lines()[1]).toEqual({ drained: 'PONG' });
      expect(isAlive(started?.pid ?? 0)).toBe(false);
    } finally {
      if (owner.exitCode === null) process.kill(-(owner.pid ?? 0), 'SIGKILL');
    }
  });

  it('should start two private servers on different ports', async () => {
    const [a, b] = await Promise.all([startLocalRedis(), startLocalRedis()]);
    try {
      expect(a.port).not.toBe(b.port);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('should report a missing redis-server with the install command', async () => {
    expect(findRedisServer('/nonexistent-dir')).toBeUndefined();
    const missing = await (async () => {
      const saved = process.env.PATH;
      process.env.PATH = '/nonexistent-dir';
      try {
        return await startLocalRedis().then(
          () => undefined,
          (e: unknown) => e,
        );
      } finally {
        process.env.PATH = saved;
      }
    })();
    expect(isCallgateError(missing, 'CALLGATE_ERR_REDIS_NOT_INSTALLED')).toBe(true);
    expect((missing as Error).message).toContain('apt-get install -y redis-server');
  });
});

describe('when REDIS_URL is given', () => {
  it('should use it and start nothing', async () => {
    const endpoint = await resolveRedis(testRedisUrl());
    expect(endpoint.url).toBe(testRedisUrl());
    expect(endpoint.local).toBeUndefined();
    await expect(checkRedis(endpoint.url)).resolves.toBeUndefined();
  });

  it('should fail fast, naming the URL without its password, when nothing answers', async () => {
    const port = await freeLoopbackPort();
    const started = Date.now();
    const error = await checkRedis(`redis://user:s3cretpass@127.0.0.1:${port}/0`, 1000).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(3000);
    expect(isCallgateError(error, 'CALLGATE_ERR_REDIS_UNREACHABLE')).toBe(true);
    expect((error as Error).message).toContain(`redis://user:***@127.0.0.1:${port}/0`);
    expect((error as Error).message).not.toContain('s3cretpass');
    expect(safeRedisUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
  });
});
