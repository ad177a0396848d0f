/**
 * The session registry: one entry per call for the life of the call (owner gateway, tenant,
 * caller, heartbeat), the call's own events, and a list of recent calls for the operator's view.
 * Gateways heartbeat in the Janitor's registry; this one says which calls a gateway holds, so a
 * call whose heartbeat stopped is known to be gone with its gateway.
 *
 *   {prefix}:calls:active      zset   session id -> last heartbeat (ms)
 *   {prefix}:calls:recent      zset   session id -> end time (ms), trimmed to RECENT_CALLS and to
 *                                     the records' retention
 *   {prefix}:call:<id>         hash   the CallRecord fields; expires privacy.callRecordsTtlSeconds
 *                                     after the call ended (refreshed while it is live)
 *   {prefix}:call:<id>:events  list   CallEventRecord JSON, in order; expires
 *                                     privacy.timelineTtlSeconds after the last event
 *
 * Retention is pinned by test/integration/call/call-retention.test.ts.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../../config/log.ts';
import {
  CALL_RECORDS_TTL_DEFAULT_SECONDS,
  TIMELINE_TTL_DEFAULT_SECONDS,
  type PrivacyConfig,
} from '../../config/schema.ts';
import type { CallEvent, CallEventRecord } from './call-events.ts';

/** Ended calls kept in the recent list: enough for an operator's screen, bounded in memory. */
const RECENT_CALLS = 500;

export interface CallRecord {
  readonly sessionId: string;
  readonly tenantId: string;
  readonly sipCallId: string;
  readonly caller: string;
  readonly calledNumber: string;
  readonly agent: string;
  /** The agents release the call runs with (agents/agent-versions.ts). */
  readonly agentVersion?: string;
  readonly ownerGateway: string;
  readonly startedAt: number;
  readonly heartbeatAt?: number;
  readonly endedAt?: number;
  readonly endReason?: string;
  /** `lost`: still listed as active, but its gateway stopped heartbeating (it died with the call). */
  readonly state: 'active' | 'ended' | 'lost';
}

export interface CallRegistryOptions {
  readonly redis: Redis;
  readonly prefix: string;
  readonly gatewayId: string;
  /** How often live calls are refreshed; the gateway's heartbeat interval. */
  readonly heartbeatMs: number;
  /** A call whose heartbeat is older than this is shown as lost (the gateway's deadAfterMs). */
  readonly deadAfterMs: number;
  readonly log: Logger;
  /** How long records and events are kept; the schema's defaults when unset. */
  readonly retention?: Pick<PrivacyConfig, 'callRecordsTtlSeconds' | 'timelineTtlSeconds'>;
}

export class CallRegistry {
  private readonly live = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  private readonly recordTtlSeconds: number;
  private readonly eventsTtlSeconds: number;

  constructor(private readonly options: CallRegistryOptions) {
    this.recordTtlSeconds =
      options.retention?.callRecordsTtlSeconds ?? CALL_RECORDS_TTL_DEFAULT_SECONDS;
    this.eventsTtlSeconds = options.retention?.timelineTtlSeconds ?? TIMELINE_TTL_DEFAULT_SECONDS;
  }

  private get activeKey(): string {
    return `${this.options.prefix}:calls:active`;
  }

  private get recentKey(): string {
    return `${this.options.prefix}:calls:recent`;
  }

  private recordKey(sessionId: string): string {
    return `${this.options.prefix}:call:${sessionId}`;
  }

  private eventsKey(sessionId: string): string {
    return `${this.recordKey(sessionId)}:events`;
  }

  start(): void {
    this.timer = setInterval(() => {
      this.beat().catch((error: unknown) =>
        this.options.log.warn('call heartbeat failed', { error }),
      );
    }, this.options.heartbeatMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  async open(record: Omit<CallRecord, 'state' | 'heartbeatAt' | 'ownerGateway'>): Promise<void> {
    const now = Date.now();
    this.live.add(record.sessionId);
    const key = this.recordKey(record.sessionId);
    await this.options.redis
      .multi()
      .hset(key, {
        session_id: record.sessionId,
        tenant_id: record.tenantId,
        sip_call_id: record.sipCallId,
        caller: record.caller,
        called_number: record.calledNumber,
        agent: record.agent,
        ...(record.agentVersion !== undefined && { agent_version: record.agentVersion }),
        owner_gateway: this.options.gatewayId,
        started_at: String(record.startedAt),
        heartbeat_at: String(now),
        state: 'active',
      })
      .expire(key, this.recordTtlSeconds)
      .zadd(this.activeKey, now, record.sessionId)
      .exec();
  }

  async update(sessionId: string, fields: Readonly<Record<string, string>>): Promise<void> {
    await this.options.redis.hset(this.recordKey(sessionId), fields);
  }

  async appendEvent(sessionId: string, event: CallEvent, at = Date.now()): Promise<void> {
    const record: CallEventRecord = { at, sessionId, event };
    const key = this.eventsKey(sessionId);
    await this.options.redis
      .multi()
      .rpush(key, JSON.stringify(record))
      .expire(key, this.eventsTtlSeconds)
      .exec();
  }

  async close(sessionId: string, reason: string): Promise<void> {
    this.live.delete(sessionId);
    const now = Date.now();
    const key = this.recordKey(sessionId);
    await this.options.redis
      .multi()
      .hset(key, {
        state: 'ended',
        ended_at: String(now),
        end_reason: reason,
      })
      .expire(key, this.recordTtlSeconds)
      .zrem(this.activeKey, sessionId)
      .zadd(this.recentKey, now, sessionId)
      .zremrangebyrank(this.recentKey, 0, -RECENT_CALLS - 1)
      .zremrangebyscore(this.recentKey, '-inf', now - this.recordTtlSeconds * 1000)
      .exec();
  }

  async get(sessionId: string): Promise<CallRecord | undefined> {
    const hash = await this.options.redis.hgetall(this.recordKey(sessionId));
    return toRecord(hash);
  }

  async events(sessionId: string): Promise<CallEventRecord[]> {
    return (await this.options.redis.lrange(this.eventsKey(sessionId), 0, -1)).map(
      (line) => JSON.parse(line) as CallEventRecord,
    );
  }

  /** Active calls of every gateway (newest heartbeat first; `lost` when their gateway died) and the most recent ended ones. */
  async list(limit = 100): Promise<{ active: CallRecord[]; recent: CallRecord[] }> {
    const { redis } = this.options;
    const active = await redis.zrevrange(this.activeKey, 0, limit - 1);
    const recent = await redis.zrevrange(this.recentKey, 0, limit - 1);
    const load = async (ids: string[]) =>
      (await Promise.all(ids.map((id) => this.get(id)))).filter(
        (r): r is CallRecord => r !== undefined,
      );
    const staleBefore = Date.now() - this.options.deadAfterMs;
    const live = (await load(active)).map((r): CallRecord =>
      r.state === 'active' && (r.heartbeatAt ?? 0) < staleBefore ? { ...r, state: 'lost' } : r,
    );
    return { active: live, recent: await load(recent) };
  }

  private async beat(): Promise<void> {
    if (this.live.size === 0) return;
    const now = Date.now();
    const pipeline = this.options.redis.pipeline();
    for (const id of this.live) {
      pipeline.zadd(this.activeKey, now, id);
      pipeline.hset(this.recordKey(id), 'heartbeat_at', String(now));
      // A live call's record never expires under it: retention counts from the call's end.
      pipeline.expire(this.recordKey(id), this.recordTtlSeconds);
    }
    await pipeline.exec();
  }
}

function toRecord(hash: Readonly<Record<string, string>>): CallRecord | undefined {
  if (hash.session_id === undefined) return undefined;
  const number = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  return {
    sessionId: hash.session_id,
    tenantId: hash.tenant_id ?? '',
    sipCallId: hash.sip_call_id ?? '',
    caller: hash.caller ?? '',
    calledNumber: hash.called_number ?? '',
    agent: hash.agent ?? '',
    ...(hash.agent_version !== undefined && { agentVersion: hash.agent_version }),
    ownerGateway: hash.owner_gateway ?? '',
    startedAt: Number(hash.started_at ?? 0),
    ...(hash.heartbeat_at !== undefined && { heartbeatAt: number(hash.heartbeat_at) }),
    ...(hash.ended_at !== undefined && { endedAt: number(hash.ended_at) }),
    ...(hash.end_reason !== undefined && { endReason: hash.end_reason }),
    state: hash.state === 'ended' ? 'ended' : 'active',
  };
}
