/**
 * A Redis primary with one asynchronous replica on loopback, each a redis-server on a free port in
 * a temporary directory, the primary with AOF on (as the chart runs it). Clients reach the primary
 * through a TcpProxy. A failover kills the primary (what it had not replicated is lost, as when a
 * node dies), promotes the replica and repoints the proxy; a fresh replica of the new primary then
 * takes the old one's place, so the next failover has somewhere to go.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TcpProxy } from './tcp-proxy.ts';

/** How long a redis-server may take to accept connections (and a replica to finish its first sync). */
const START_TIMEOUT_MS = 15_000;

interface RedisNode {
  readonly port: number;
  readonly dir: string;
  child: ChildProcess;
}

export class RedisPair {
  private primary: RedisNode;
  private replica: RedisNode;
  private readonly dirs: string[] = [];
  readonly url: string;

  private constructor(
    primary: RedisNode,
    replica: RedisNode,
    private readonly proxy: TcpProxy,
    proxyPort: number,
  ) {
    this.primary = primary;
    this.replica = replica;
    this.dirs.push(primary.dir, replica.dir);
    this.url = `redis://127.0.0.1:${proxyPort}`;
  }

  static async start(): Promise<RedisPair> {
    const primary = await startNode(undefined);
    const replica = await startNode(primary.port);
    await waitForSync(replica.port);
    const { proxy, port } = await TcpProxy.start(primary.port);
    return new RedisPair(primary, replica, proxy, port);
  }

  /** On an abrupt end of the run (SIGINT): both servers killed by PID, their directories removed, no waiting. */
  killNow(): void {
    this.proxy.cutAll();
    for (const node of [this.primary, this.replica])
      if (node.child.exitCode === null && node.child.signalCode === null)
        node.child.kill('SIGKILL');
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
  }

  /** The primary is lost without warning; the replica becomes primary; a new replica follows it. */
  async failover(): Promise<void> {
    await stopNode(this.primary, 'SIGKILL');
    await redisCli(this.replica.port, 'REPLICAOF', 'NO', 'ONE');
    this.primary = this.replica;
    this.proxy.repoint(this.primary.port);
    this.replica = await startNode(this.primary.port);
    this.dirs.push(this.replica.dir);
    await waitForSync(this.replica.port);
  }

  /** The primary stops cleanly (AOF flushed) and is down for `downMs`, then starts again on its port and data. */
  async restartPrimary(downMs: number): Promise<void> {
    // A clean stop is one whose AOF is whole: a rewrite still running (after a replica's full sync,
    // slow on a loaded machine) would leave it without its base and the restart without the data.
    await waitForAofSettled(this.primary.port);
    await stopNode(this.primary, 'SIGTERM');
    this.proxy.cutAll();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    this.primary.child = spawnServer(this.primary.port, this.primary.dir, undefined);
    await waitForPing(this.primary.port);
  }

  /** The primary's port right now, for a direct look at the data. */
  primaryPort(): number {
    return this.primary.port;
  }

  async stop(): Promise<void> {
    await this.proxy.close();
    await Promise.all([stopNode(this.primary, 'SIGTERM'), stopNode(this.replica, 'SIGTERM')]);
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
  }
}

async function startNode(primaryPort: number | undefined): Promise<RedisNode> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'callgate-chaos-redis-'));
  const child = spawnServer(port, dir, primaryPort);
  await waitForPing(port);
  return { port, dir, child };
}

function spawnServer(port: number, dir: string, primaryPort: number | undefined): ChildProcess {
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--protected-mode',
    'no',
    '--loglevel',
    'warning',
  ];
  if (primaryPort !== undefined) args.push('--replicaof', '127.0.0.1', String(primaryPort));
  return spawn('redis-server', args, { stdio: 'ignore' });
}

async function stopNode(node: RedisNode, signal: NodeJS.Signals): Promise<void> {
  const { child } = node;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

/** redis-cli, asynchronously: the run's own event loop carries the sandbox and the proxies. */
function redisCli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(
      'redis-cli',
      ['-p', String(port), ...args],
      { encoding: 'utf8', timeout: 5_000 },
      (_error, stdout) => resolve(String(stdout).trim()),
    );
  });
}

async function waitForPing(port: number): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if ((await redisCli(port, 'PING')) === 'PONG') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`redis-server on port ${port} did not answer within ${START_TIMEOUT_MS} ms`);
}

/** Until no AOF rewrite runs or is scheduled (bounded: a stop past the bound is then not clean). */
async function waitForAofSettled(port: number): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const info = await redisCli(port, 'INFO', 'persistence');
    if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitForSync(port: number): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (/master_link_status:up/.test(await redisCli(port, 'INFO', 'replication'))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the replica on port ${port} did not sync within ${START_TIMEOUT_MS} ms`);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
