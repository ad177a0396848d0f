/**
 * A Redis primary with one replica on loopback, for tests of what a lost primary does to the
 * ledger: each a real redis-server in a temporary directory, stopped and removed after the test.
 * The replica replicates through a TCP relay: `pauseReplica` holds the primary's stream in the
 * relay (the replica falls behind, as an asynchronous replica does, and acknowledges nothing new);
 * `failover` loses the primary (SIGKILL) with what the relay held, and promotes the replica, which
 * keeps only what it had received.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect as connectTcp, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';
import { waitFor } from './processes.ts';

export interface RedisNode {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
}

export interface RedisPair {
  readonly primary: RedisNode;
  readonly replica: RedisNode;
  /** Holds the replication stream from the primary (the replica falls behind) until `resumeReplica`. */
  pauseReplica(): void;
  resumeReplica(): void;
  /** Kills the primary and makes the replica a primary; resolves when it takes writes. */
  failover(): Promise<void>;
  stop(): Promise<void>;
}

async function startNode(extra: readonly string[]): Promise<RedisNode & { readonly dir: string }> {
  const port = await freeLoopbackPort();
  const dir = mkdtempSync(join(tmpdir(), 'callgate-redis-pair-'));
  const child = spawn(
    'redis-server',
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
      '--maxmemory-policy',
      'noeviction',
      ...extra,
    ],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on('error', () => undefined);
  try {
    await waitFor(
      async () =>
        (await probe
          .connect()
          .then(() => probe.ping())
          .catch(() => undefined)) === 'PONG'
          ? true
          : undefined,
      10_000,
      `redis-server on ${port}`,
    );
  } finally {
    probe.disconnect();
  }
  return { port, url, process: child, dir };
}

/** A relay from the replica to the primary whose primary-to-replica direction can be held. */
interface ReplicationRelay {
  readonly port: number;
  hold(): void;
  resume(): void;
  /** Drops what is held and cuts every link (the primary is gone). */
  cut(): void;
  close(): void;
}

async function startRelay(primaryPort: number): Promise<ReplicationRelay> {
  let holding = false;
  const links: { upstream: Socket; downstream: Socket; held: Buffer[] }[] = [];
  const server: Server = createServer((downstream) => {
    const upstream = connectTcp(primaryPort, '127.0.0.1');
    const link = { upstream, downstream, held: [] as Buffer[] };
    links.push(link);
    downstream.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (holding) link.held.push(chunk);
      else downstream.write(chunk);
    });
    const end = () => {
      upstream.destroy();
      downstream.destroy();
    };
    upstream.on('error', end);
    downstream.on('error', end);
    upstream.on('close', end);
    downstream.on('close', end);
  });
  const port = await freeLoopbackPort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    hold: () => {
      holding = true;
    },
    resume: () => {
      holding = false;
      for (const link of links)
        for (const chunk of link.held.splice(0)) link.downstream.write(chunk);
    },
    cut: () => {
      for (const link of links.splice(0)) {
        link.held = [];
        link.upstream.destroy();
        link.downstream.destroy();
      }
    },
    close: () => {
      server.close();
    },
  };
}

export async function startRedisPair(): Promise<RedisPair> {
  const primary = await startNode([]);
  const relay = await startRelay(primary.port);
  const replica = await startNode(['--replicaof', '127.0.0.1', String(relay.port)]);
  const admin = new Redis(replica.url, { maxRetriesPerRequest: null });
  await waitFor(
    async () =>
      (await admin.info('replication')).includes('master_link_status:up') ? true : undefined,
    10_000,
    'the replica to sync',
  );
  return {
    primary,
    replica,
    pauseReplica: () => relay.hold(),
    resumeReplica: () => relay.resume(),
    async failover() {
      primary.process.kill('SIGKILL');
      relay.cut();
      relay.close();
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await waitFor(
        async () => ((await admin.info('replication')).includes('role:master') ? true : undefined),
        10_000,
        'the replica to become primary',
      );
    },
    async stop() {
      admin.disconnect();
      relay.cut();
      relay.close();
      for (const node of [primary, replica]) {
        node.process.kill('SIGKILL');
        rmSync(node.dir, { recursive: true, force: true });
      }
    },
  };
}
