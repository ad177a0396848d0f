/**
 * A private redis-server for development, tests and the embedded default: started from PATH on a
 * free loopback port with a temporary directory, stopped (and the directory removed) on exit.
 * When REDIS_URL is set nothing is started and that URL is used.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { CallgateError } from '../../config/errors.ts';

/** How long redis-server may take to print that it accepts connections. */
const START_TIMEOUT_MS = 10_000;
/** How long it may take to exit on SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 5_000;

export interface LocalRedis {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

export interface RedisEndpoint {
  readonly url: string;
  /** Set when callgate started the server itself and must stop it. */
  readonly local?: LocalRedis;
}

/** Uses `url` when given, otherwise starts a private redis-server. */
export async function resolveRedis(url: string | undefined): Promise<RedisEndpoint> {
  if (url !== undefined && url !== '') return { url };
  const local = await startLocalRedis();
  return { url: local.url, local };
}

/** Looks redis-server up on PATH the way a shell would. */
export function findRedisServer(pathVariable = process.env.PATH ?? ''): string | undefined {
  for (const dir of pathVariable.split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

export async function startLocalRedis(options: { binary?: string } = {}): Promise<LocalRedis> {
  const binary = options.binary ?? findRedisServer();
  if (binary === undefined) throw new CallgateError('CALLGATE_ERR_REDIS_NOT_INSTALLED');
  let lastError: unknown;
  // A port found free can be taken by someone else before redis binds it; try a few.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freeLoopbackPort();
    try {
      return await launch(binary, port);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError instanceof CallgateError
    ? lastError
    : new CallgateError('CALLGATE_ERR_REDIS_START_FAILED', { reason: String(lastError) });
}

async function launch(binary: string, port: number): Promise<LocalRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-redis-'));
  const child = spawn(
    binary,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'yes',
      // BullMQ requires that keys are never evicted.
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
      '--loglevel',
      'notice',
    ],
    // Its own process group: Ctrl-C in a terminal (or any signal to callgate's group) must not stop
    // Redis while callgate is still draining into it; callgate stops it last, the watchdog if callgate dies.
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  const cleanupDir = () => rmSync(dir, { recursive: true, force: true });
  try {
    await waitForReady(child, port);
  } catch (error) {
    child.kill('SIGKILL');
    cleanupDir();
    throw error;
  }
  const watchdog = startWatchdog(child, dir);
  const killOnExit = () => {
    watchdog?.kill('SIGKILL');
    child.kill('SIGKILL');
    cleanupDir();
  };
  process.once('exit', killOnExit);
  let stopped: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    stop: () => {
      // The watchdog goes first: once redis has exited, its pid may belong to someone else.
      watchdog?.kill('SIGKILL');
      stopped ??= stopChild(child).finally(() => {
        process.removeListener('exit', killOnExit);
        cleanupDir();
      });
      return stopped;
    },
  };
}

/**
 * A process that outlives callgate only to clean up after it: it waits for end of file on a pipe
 * whose other end only this process holds. If callgate dies without running its exit handlers
 * (SIGKILL, OOM killer), the kernel closes the pipe and the watchdog kills the private
 * redis-server and removes its directory, so nothing is left listening. Stopped first on a
 * normal stop. Without `sh` the server is still stopped on every exit that runs handlers.
 */
function startWatchdog(server: ChildProcess, dir: string): ChildProcess | undefined {
  if (server.pid === undefined) return undefined;
  try {
    const watchdog = spawn(
      'sh',
      [
        '-c',
        'cat >/dev/null; kill -9 "$1" 2>/dev/null; rm -rf "$2"',
        'callgate-redis-watchdog',
        String(server.pid),
        dir,
      ],
      {
        stdio: ['pipe', 'ignore', 'ignore'],
        // Out of callgate's process group too: a Ctrl-C that killed it would take Redis down early.
        detached: true,
      },
    );
    watchdog.on('error', () => undefined);
    watchdog.stdin?.on('error', () => undefined);
    // Neither the process nor its pipe may keep callgate's event loop alive.
    watchdog.unref();
    (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return watchdog;
  } catch {
    return undefined;
  }
}

function waitForReady(child: ChildProcess, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => finish(new Error(`not ready after ${START_TIMEOUT_MS} ms: ${output.slice(-300)}`)),
      START_TIMEOUT_MS,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) finish();
    };
    const onExit = (code: number | null) =>
      finish(new Error(`exited with code ${code} on port ${port}: ${output.trim().slice(-300)}`));
    function finish(error?: Error) {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onExit);
      // Keep draining so a chatty server never blocks on a full pipe.
      child.stdout?.resume();
      child.stderr?.resume();
      if (error)
        reject(new CallgateError('CALLGATE_ERR_REDIS_START_FAILED', { reason: error.message }));
      else resolve();
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onExit);
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export function freeLoopbackPort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}
