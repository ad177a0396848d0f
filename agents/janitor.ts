/**
 * Gateways heartbeat into a registry; a janitor in every live gateway looks for gateways that
 * stopped, takes a lock per dead gateway, and delivers out of band whatever lands in that
 * gateway's result streams: its calls are gone, but their operations finish, and each result still
 * reaches the caller exactly once (the delivery record on the operation and the message key guard it).
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../config/log.ts';
import { counter } from '../config/metrics.ts';
import { DELIVERY_GROUP, ensureGroup, streamFields, type ResultDelivery } from './result-delivery.ts';

const takeovers = counter({
  name: 'callgate_janitor_events_total',
  help: 'Result events of dead gateways handled by a janitor.',
  labelNames: ['tenant'],
});

/**
 * How long the janitor keeps watching a dead gateway's streams: operations started there may finish
 * long after it died (their deadline), and their results must still go out.
 */
const WATCH_DEAD_FOR_MS = 24 * 3_600_000;
/** The lock on a dead gateway outlives one janitor round, so two janitors never work the same streams. */
const LOCK_MS = 30_000;

export interface JanitorOptions {
  readonly redis: Redis;
  readonly prefix: string;
  readonly gatewayId: string;
  readonly tenants: readonly string[];
  readonly delivery: ResultDelivery;
  readonly heartbeatMs: number;
  readonly deadAfterMs: number;
  readonly log: Logger;
}

export class Janitor {
  private heartbeat: NodeJS.Timeout | undefined;
  private sweeping: NodeJS.Timeout | undefined;
  private round: Promise<number> | undefined;

  constructor(private readonly options: JanitorOptions) {}

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

  /** Leaves the registry on a clean shutdown, so the janitors take over at once. */
  async resign(): Promise<void> {
    await this.options.redis.zadd(this.registry, 0, this.options.gatewayId);
  }

  private async beat(): Promise<void> {
    await this.options.redis.zadd(this.registry, Date.now(), this.options.gatewayId);
  }

  /** One round over dead gateways; returns how many events it delivered. */
  sweep(): Promise<number> {
    this.round ??= this.work().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  private async work(): Promise<number> {
    const { redis, gatewayId, tenants, delivery, deadAfterMs, log } = this.options;
    const now = Date.now();
    await redis.zremrangebyscore(this.registry, 1, now - WATCH_DEAD_FOR_MS);
    const dead = (await redis.zrangebyscore(this.registry, '-inf', now - deadAfterMs)).filter((id) => id !== gatewayId);
    let handled = 0;
    for (const gateway of dead) {
      const lock = `${this.options.prefix}:janitor:${gateway}`;
      if ((await redis.set(lock, gatewayId, 'PX', LOCK_MS, 'NX')) !== 'OK' && (await redis.get(lock)) !== gatewayId) continue;
      const consumer = `janitor-${gatewayId}`;
      for (const tenant of tenants) {
        const key = delivery.streamKey(tenant, gateway);
        await ensureGroup(redis, key);
        // What the dead gateway read but never acknowledged, then what it never read.
        const claimed = (await redis.xautoclaim(key, DELIVERY_GROUP, consumer, 0, '0-0', 'COUNT', 500)) as [string, [string, string[]][]];
        const fresh = (await redis.xreadgroup('GROUP', DELIVERY_GROUP, consumer, 'COUNT', 500, 'STREAMS', key, '>')) as [string, [string, string[]][]][] | null;
        const entries = [...claimed[1], ...(fresh?.[0]?.[1] ?? [])];
        for (const [id, fields] of entries) {
          await delivery.processEvent(tenant, key, DELIVERY_GROUP, id, streamFields(fields), true);
          takeovers.labels(tenant).inc();
          handled++;
        }
      }
      if (handled > 0) log.warn('delivered results of a gateway that stopped', { dead_gateway: gateway, events: handled });
    }
    return handled;
  }
}
