/**
 * Gateways heartbeat into a registry; a janitor in every live gateway looks for gateways that
 * stopped, takes a lock per dead gateway, and delivers out of band whatever lands in that
 * gateway's result streams: its calls are gone, but their operations finish, and each result still
 * reaches the caller exactly once (the delivery record on the operation and the message key guard it).
 * A gateway that shuts down cleanly resigns: it looks dead from then on and is handled the same way.
 * When the watch window ends, nothing is left to deliver and no operation it owns is still open
 * (an UNKNOWN resolved later appends its result there), its streams and registry entry go.
 *
 * Liveness is judged on Redis's clock (gateway-heartbeat-1.lua, gateways-dead-1.lua), so a gateway
 * clock that is off changes nothing; only entries idle past the dead threshold are taken over, and
 * a live gateway restarts the idle time of every entry it holds with each heartbeat; a janitor
 * that was cut off from Redis watches a full dead threshold afresh before it judges anyone.
 * Pinned by test/integration/agents/janitor-clock-offset.test.ts and janitor-after-redis-cut.test.ts.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../config/log.ts';
import { counter, gauge } from '../config/metrics.ts';
import type { OperationLedger } from '../jobs/ledger/operation-ledger.ts';
import { deadGateways, heartbeat, janitorLockKey, registryKey } from './delivery-scripts.ts';
import {
  DELIVERY_GROUP,
  janitorConsumer,
  streamFields,
  type ResultDelivery,
} from './result-delivery.ts';

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
/**
 * Open operations of a tenant looked at before a dead gateway is retired; a tenant with more keeps
 * the gateway's streams watched (never retired on a partial look) until fewer are open.
 */
const OPEN_OPERATIONS_LOOKED_AT = 10_000;
/**
 * How often a janitor tries again to retire a gateway past its watch window: each try reads the
 * tenant's open operations, and a gateway that owns one stuck UNKNOWN (waiting for a person) could
 * otherwise cost that read every round. A minute is nothing against the 24 h window.
 */
const RETIRE_RETRY_MS = 60_000;

const clockOffset = gauge({
  name: 'callgate_gateway_clock_offset_seconds',
  help: "This gateway's process clock minus Redis's clock at its last heartbeat (liveness uses Redis's clock only).",
});

export interface JanitorOptions {
  readonly redis: Redis;
  readonly prefix: string;
  readonly gatewayId: string;
  readonly tenants: readonly string[];
  readonly delivery: ResultDelivery;
  /** Open operations, to retire a dead gateway only when none it owns can still report. */
  readonly ledger: Pick<OperationLedger, 'listOpen'>;
  /** Below deadAfterMs / 3 (config validation): see `continuityMs`. */
  readonly heartbeatMs: number;
  readonly deadAfterMs: number;
  readonly log: Logger;
  /** The process clock, only compared with Redis's (a gauge); tests run gateways whose clock is off. */
  readonly now?: () => number;
}

export class Janitor {
  private heartbeat: NodeJS.Timeout | undefined;
  private sweeping: NodeJS.Timeout | undefined;
  private round: Promise<number> | undefined;
  private readonly now: () => number;
  /** Heartbeating (start() was called): rounds then wait for a full dead threshold of contact. */
  private beating = false;
  /** Redis time of the first heartbeat of the current unbroken run of contact, none while cut off. */
  private contactSince: number | undefined;
  private lastContact: number | undefined;
  /**
   * The longest gap between two heartbeats that still counts as unbroken contact. After a longer
   * one, other gateways' heartbeats may be as old as the gap plus two heartbeat intervals (one
   * before the cut, one after it), which stays below deadAfterMs only up to this gap.
   */
  private readonly continuityMs: number;
  /** Redis time before which a gateway that could not be retired is not tried again. */
  private readonly retireAfter = new Map<string, number>();

  constructor(private readonly options: JanitorOptions) {
    this.now = options.now ?? Date.now;
    this.continuityMs = Math.max(
      options.heartbeatMs,
      options.deadAfterMs - 2 * options.heartbeatMs,
    );
  }

  async start(): Promise<void> {
    this.beating = true;
    await this.beat();
    this.heartbeat = setInterval(() => {
      this.beat().catch((error: unknown) => this.options.log.warn('heartbeat failed', { error }));
    }, this.options.heartbeatMs);
    this.sweeping = setInterval(() => {
      this.sweep().catch((error: unknown) =>
        this.options.log.warn('janitor round failed', { error }),
      );
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
   * On a clean shutdown: the gateway's heartbeat is set (on Redis's clock) to look as old as a dead
   * gateway's, so the janitors take over its streams at once (what it held, once idle past the dead
   * threshold: it may still be telling it while it drains), watch them for results of operations
   * still running, and retire it when the watch window ends, as they do for a gateway that died.
   */
  async resign(): Promise<void> {
    this.beating = false;
    await heartbeat(
      this.options.redis,
      this.options.prefix,
      this.options.gatewayId,
      'resign',
      this.options.deadAfterMs,
    );
  }

  /**
   * One heartbeat on Redis's clock, then the idle time of every result entry this gateway holds
   * starts again. A failed one ends the run of contact: rounds wait until a new run is as long as
   * the dead threshold, so a janitor back from a Redis outage judges no one on heartbeats the
   * outage made old.
   */
  private async beat(): Promise<void> {
    const { redis, prefix, gatewayId, deadAfterMs, delivery } = this.options;
    let now: number;
    try {
      now = await heartbeat(redis, prefix, gatewayId, 'beat', deadAfterMs);
    } catch (error) {
      this.contactSince = undefined;
      throw error;
    }
    clockOffset.set((this.now() - now) / 1000);
    this.observe(now);
    await delivery.refreshHeld();
  }

  /** Redis answered at `now` (its clock): contact goes on, or starts anew after a gap. */
  private observe(now: number): void {
    if (
      this.contactSince === undefined ||
      this.lastContact === undefined ||
      now - this.lastContact > this.continuityMs
    )
      this.contactSince = now;
    this.lastContact = now;
  }

  /**
   * One round over dead gateways; returns how many events it delivered. A janitor that does not
   * heartbeat (start() not called: a one-off round) judges on the registry alone.
   */
  sweep(): Promise<number> {
    this.round ??= this.work().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  private async work(): Promise<number> {
    const { redis, prefix, gatewayId, deadAfterMs, log } = this.options;
    const { now, dead } = await deadGateways(redis, prefix, deadAfterMs);
    // A heartbeating janitor judges only after a full dead threshold of unbroken contact: the answer
    // to a round sent before a cut-off may be the first to come back after it.
    if (this.beating) {
      this.observe(now);
      if (this.contactSince === undefined || now - this.contactSince < deadAfterMs) return 0;
    }
    const watchedSince = now - WATCH_DEAD_FOR_MS;
    let handled = 0;
    // WATCH needs a connection of its own: a MULTI sent by anyone else on a shared one would drop it.
    let transactions: Redis | undefined;
    try {
      for (const { gatewayId: gateway, lastBeat } of dead) {
        if (gateway === gatewayId) continue;
        const lock = janitorLockKey(prefix, gateway);
        if (
          (await redis.set(lock, gatewayId, 'PX', LOCK_MS, 'NX')) !== 'OK' &&
          (await redis.get(lock)) !== gatewayId
        )
          continue;
        const delivered = await this.takeOver(gateway);
        if (delivered > 0)
          log.warn('delivered results of a gateway that stopped', {
            dead_gateway: gateway,
            events: delivered,
          });
        handled += delivered;
        if (lastBeat <= watchedSince && now >= (this.retireAfter.get(gateway) ?? 0)) {
          transactions ??= redis.duplicate();
          if (
            (await this.retire(transactions, gateway, watchedSince, lock)) ===
            'owns_open_operations'
          )
            this.retireAfter.set(gateway, now + RETIRE_RETRY_MS);
          else this.retireAfter.delete(gateway);
        }
      }
    } finally {
      transactions?.disconnect();
    }
    return handled;
  }

  /**
   * Delivers out of band what a dead gateway read but never acknowledged, then what it never read.
   * Only entries idle past the dead threshold (on Redis's clock) are claimed: a gateway that is
   * alive restarts the idle time of what it holds with every heartbeat.
   */
  private async takeOver(gateway: string): Promise<number> {
    const { redis, gatewayId, tenants, delivery, deadAfterMs } = this.options;
    const consumer = janitorConsumer(gatewayId);
    let handled = 0;
    for (const tenant of tenants) {
      const key = delivery.streamKey(tenant, gateway);
      // A dead gateway's stream is not made anew: where none exists, nothing was left there.
      if (!(await groupOnExistingStream(redis, key))) continue;
      const claimed = (await redis.xautoclaim(
        key,
        DELIVERY_GROUP,
        consumer,
        deadAfterMs,
        '0-0',
        'COUNT',
        TAKE_OVER_COUNT,
      )) as [string, [string, string[] | null][]];
      const fresh = (await redis.xreadgroup(
        'GROUP',
        DELIVERY_GROUP,
        consumer,
        'COUNT',
        TAKE_OVER_COUNT,
        'STREAMS',
        key,
        '>',
      )) as [string, [string, string[]][]][] | null;
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
   * owed (no entry unread or unacknowledged) and no open operation of the tenant (UNKNOWN
   * included) is owned by the gateway, in a transaction that fails if an event lands meanwhile;
   * the registry entry goes once no stream is left. Until then the entry stays and the janitors
   * keep taking its streams over, so a result that comes after the window (an UNKNOWN reconciled
   * late) still lands where a janitor reads it. Returns what held it back, if anything.
   */
  private async retire(
    connection: Redis,
    gateway: string,
    watchedSince: number,
    lock: string,
  ): Promise<'retired' | 'owes_results' | 'owns_open_operations' | 'changed'> {
    const { redis, tenants, delivery, log } = this.options;
    for (const tenant of tenants) {
      const key = delivery.streamKey(tenant, gateway);
      // Watched first: an operation found terminal below has its event in the stream by then,
      // and one that ends after the look appends to the stream and fails the transaction.
      await connection.watch(key);
      if (await owesResults(connection, key)) {
        await connection.unwatch();
        log.warn('a gateway past its watch window still has results to deliver', {
          dead_gateway: gateway,
          tenant,
        });
        return 'owes_results';
      }
      if (await this.ownsOpenOperations(tenant, gateway)) {
        await connection.unwatch();
        log.warn(
          'a gateway past its watch window still owns open operations; its streams stay watched',
          { dead_gateway: gateway, tenant },
        );
        return 'owns_open_operations';
      }
      if ((await connection.multi().del(key).exec()) === null) return 'changed';
    }
    const score = await redis.zscore(registryKey(this.options.prefix), gateway);
    // A gateway with the same id that heartbeats again keeps its entry (and makes its streams anew).
    if (score !== null && Number(score) <= watchedSince)
      await redis.zrem(registryKey(this.options.prefix), gateway);
    await redis.del(lock);
    log.info('retired a gateway after its watch window', { dead_gateway: gateway });
    return 'retired';
  }

  /** Whether an open (or UNKNOWN) operation of the tenant is owned by `gateway`; true when too many to tell. */
  private async ownsOpenOperations(tenant: string, gateway: string): Promise<boolean> {
    const open = await this.options.ledger.listOpen(
      tenant,
      Number.POSITIVE_INFINITY,
      OPEN_OPERATIONS_LOOKED_AT,
    );
    return (
      open.length >= OPEN_OPERATIONS_LOOKED_AT ||
      open.some((op) => op.scope.ownerGateway === gateway)
    );
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
  const groups = ((await redis.xinfo('GROUPS', key)) as unknown[][]).map((row) =>
    streamFields(row.map(String)),
  );
  const group = groups.find((g) => g.name === DELIVERY_GROUP);
  if (!group) return true;
  return (
    Number(group.pending) > 0 || compareStreamIds(lastId, group['last-delivered-id'] ?? '0-0') > 0
  );
}

function compareStreamIds(a: string, b: string): number {
  const [aMs = 0n, aSeq = 0n] = a.split('-').map(BigInt);
  const [bMs = 0n, bSeq = 0n] = b.split('-').map(BigInt);
  if (aMs !== bMs) return aMs < bMs ? -1 : 1;
  return aSeq === bSeq ? 0 : aSeq < bSeq ? -1 : 1;
}
