/**
 * Gateways heartbeat into a registry; a janitor in every live gateway looks for gateways that
 * stopped, takes a lock per dead gateway, and delivers out of band whatever lands in that
 * gateway's result streams: its calls are gone, but their operations finish, and each result still
 * reaches the caller exactly once (the delivery record on the operation and the message key guard it).
 * A gateway that shuts down cleanly resigns: it looks dead from then on and is handled the same way.
 * When the watch window ends and nothing is left to deliver, its streams and registry entry go.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../config/log.ts';
import { counter } from '../config/metrics.ts';
import { DELIVERY_GROUP, streamFields, type ResultDelivery } from './result-delivery.ts';

const takeovers = counter({
  name: 'callgate_janitor_events_total',
  help: 'Result events of dead gateways handled by a janitor.',
  labelNames: ['tenant'],
});

/**
 * How long the janitor keeps watching a dead gateway's streams: operations started there may finish
 * long after it died (their deadline), and their results must still go out. After it, once every
 * result left there has been delivered, the gateway's streams and its registry entry are removed.
 */
const WATCH_DEAD_FOR_MS = 24 * 3_600_000;
/** The lock on a dead gateway outlives one janitor round, so two janitors never work the same streams. */
const LOCK_MS = 30_000;
/** Entries taken over per stream per round, of each kind (unacknowledged, never read). */
const TAKE_OVER_COUNT = 500;

export interface JanitorOptions {
  readonly redis: Redis;
  readonly prefix: string;
  readonly gatewayId: string;
  readonly tenants: readonly string[];
  readonly delivery: ResultDelivery;
  readonly heartbeatMs: number;
  readonly deadAfterMs: number;
  readonly log: Logger;
  /** Clock, for tests. */
  readonly now?: () => number;
}

export class Janitor {
  private heartbeat: NodeJS.Timeout | undefined;
  private sweeping: NodeJS.Timeout | undefined;
  private round: Promise<number> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: JanitorOptions) {
    this.now = options.now ?? Date.now;
  }

  private get registry(): string {
    return `${this.options.prefix}:gateways`;
  }

  async start(): Promise<void> {
    await this.beat();
    this.heartbeat = setInterval(() => {
      this.beat().catch((error: unknown) => this.options.log.warn('heartbeat failed', { error }));
    }, this.options.heartbeatMs);
    this.sweeping = setInterval(() => {
      this.sweep().catch((error: unknown) => this.options.log.warn('janitor round failed', { error }));
    }, this.options.heartbeatMs);
    this.heartbeat.unref();
    this.sweeping.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.heartbeat);
    clearInterval(this.sweeping);
    await this.round?.catch(() => undefined);
  }

  /**
   * On a clean shutdown: the gateway's heartbeat is set to look as old as a dead gateway's, so the
   * janitors take over its streams at once, watch them for results of operations still running, and
   * retire it when the watch window ends, as they do for a gateway that died.
   */
  async resign(): Promise<void> {
    await this.options.redis.zadd(this.registry, this.now() - this.options.deadAfterMs - 1, this.options.gatewayId);
  }

  private async beat(): Promise<void> {
    await this.options.redis.zadd(this.registry, this.now(), this.options.gatewayId);
  }

  /** One round over dead gateways; returns how many events it delivered. */
  sweep(): Promise<number> {
    this.round ??= this.work().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  private async work(): Promise<number> {
    const { redis, gatewayId, deadAfterMs, log } = this.options;
    const now = this.now();
    const watchedSince = now - WATCH_DEAD_FOR_MS;
    const rows = await redis.zrangebyscore(this.registry, '-inf', now - deadAfterMs, 'WITHSCORES');
    let handled = 0;
    // WATCH needs a connection of its own: a MULTI sent by anyone else on a shared one would drop it.
    let transactions: Redis | undefined;
    try {
      for (let i = 0; i + 1 < rows.length; i += 2) {
        const gateway = rows[i] ?? '';
        if (gateway === gatewayId) continue;
        const lock = `${this.options.prefix}:janitor:${gateway}`;
        if ((await redis.set(lock, gatewayId, 'PX', LOCK_MS, 'NX')) !== 'OK' && (await redis.get(lock)) !== gatewayId) continue;
        const delivered = await this.takeOver(gateway);
        if (delivered > 0) log.warn('delivered results of a gateway that stopped', { dead_gateway: gateway, events: delivered });
        handled += delivered;
        if (Number(rows[i + 1]) <= watchedSince) {
          transactions ??= redis.duplicate();
          await this.retire(transactions, gateway, watchedSince, lock);
        }
      }
    } finally {
      transactions?.disconnect();
    }
    return handled;
  }

  /** Delivers out of band what a dead gateway read but never acknowledged, then what it never read. */
  private async takeOver(gateway: string): Promise<number> {
    const { redis, gatewayId, tenants, delivery } = this.options;
    const consumer = `janitor-${gatewayId}`;
    let handled = 0;
    for (const tenant of tenants) {
      const key = delivery.streamKey(tenant, gateway);
      // A dead gateway's stream is not made anew: where none exists, nothing was left there.
      if (!(await groupOnExistingStream(redis, key))) continue;
      const claimed = (await redis.xautoclaim(key, DELIVERY_GROUP, consumer, 0, '0-0', 'COUNT', TAKE_OVER_COUNT)) as [string, [string, string[] | null][]];
      const fresh = (await redis.xreadgroup('GROUP', DELIVERY_GROUP, consumer, 'COUNT', TAKE_OVER_COUNT, 'STREAMS', key, '>')) as [string, [string, string[]][]][] | null;
      const entries = [...claimed[1], ...(fresh?.[0]?.[1] ?? [])];
      for (const [id, fields] of entries) {
        if (fields === null) continue;
        await delivery.processEvent(tenant, key, DELIVERY_GROUP, id, streamFields(fields), true);
        takeovers.labels(tenant).inc();
        handled++;
      }
    }
    return handled;
  }

  /**
   * The watch window of a dead gateway ended: each of its streams is deleted once nothing in it is
   * owed (no entry unread or unacknowledged), in a transaction that fails if an event lands
   * meanwhile; the registry entry goes once no stream is left. A stream still owing a result stays,
   * and so does the entry, until a later round has delivered it.
   */
  private async retire(connection: Redis, gateway: string, watchedSince: number, lock: string): Promise<void> {
    const { redis, tenants, delivery, log } = this.options;
    for (const tenant of tenants) {
      const key = delivery.streamKey(tenant, gateway);
      await connection.watch(key);
      if (await owesResults(connection, key)) {
        await connection.unwatch();
        log.warn('a gateway past its watch window still has results to deliver', { dead_gateway: gateway, tenant });
        return;
      }
      if ((await connection.multi().del(key).exec()) === null) return;
    }
    const score = await redis.zscore(this.registry, gateway);
    // A gateway with the same id that heartbeats again keeps its entry (and makes its streams anew).
    if (score !== null && Number(score) <= watchedSince) await redis.zrem(this.registry, gateway);
    await redis.del(lock);
    log.info('retired a gateway after its watch window', { dead_gateway: gateway });
  }
}

/** Makes the delivery group on a stream that exists; false when there is no stream. */
async function groupOnExistingStream(redis: Redis, key: string): Promise<boolean> {
  try {
    // No MKSTREAM: from the start of the stream, and only if there is one.
    await redis.xgroup('CREATE', key, DELIVERY_GROUP, '0');
  } catch (error) {
    if (error instanceof Error && error.message.includes('requires the key to exist')) return false;
    if (!(error instanceof Error && error.message.includes('BUSYGROUP'))) throw error;
  }
  return true;
}

/**
 * Whether a result stream holds an entry the delivery group has not read, or read and not
 * acknowledged. Acknowledged entries that were not deleted (written before entries were deleted on
 * acknowledgement) are owed to nobody.
 */
async function owesResults(redis: Redis, key: string): Promise<boolean> {
  const last = await redis.xrevrange(key, '+', '-', 'COUNT', 1);
  const lastId = last[0]?.[0];
  if (lastId === undefined) return false;
  const groups = ((await redis.xinfo('GROUPS', key)) as unknown[][]).map((row) => streamFields(row.map(String)));
  const group = groups.find((g) => g.name === DELIVERY_GROUP);
  if (!group) return true;
  return Number(group.pending) > 0 || compareStreamIds(lastId, group['last-delivered-id'] ?? '0-0') > 0;
}

function compareStreamIds(a: string, b: string): number {
  const [aMs = 0n, aSeq = 0n] = a.split('-').map(BigInt);
  const [bMs = 0n, bSeq = 0n] = b.split('-').map(BigInt);
  if (aMs !== bMs) return aMs < bMs ? -1 : 1;
  return aSeq === bSeq ? 0 : aSeq < bSeq ? -1 : 1;
}
