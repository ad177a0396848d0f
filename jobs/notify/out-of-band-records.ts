/**
 * Where each channel's out-of-band message stands, on the operation (`oob:<channel>` fields) and in
 * the tenant's index of given-up messages. The only module that calls lua/record-channel-2.lua;
 * every write goes forward only (see that script).
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { LedgerKeys } from '../ledger/keys.ts';
import type { OutOfBandChannel, OutOfBandRecord } from '../ledger/operation.ts';
import type { OutOfBandMessage } from './out-of-band-message.ts';

const SCRIPT = readFileSync(new URL('./lua/record-channel-2.lua', import.meta.url), 'utf8');
/** Error texts kept on the operation are cut to this length (a receiver may answer with a page). */
const ERROR_TEXT_MAX = 300;

interface RecordCommands {
  oobRecordChannel(...args: (string | number)[]): Promise<string[]>;
}

export type RecordStatus = 'ok' | 'as_is' | 'bound' | 'not_found';

export interface RecordOutcome {
  readonly status: RecordStatus;
  readonly record?: OutOfBandRecord;
}

export interface GivenUpEntry {
  readonly operationId: string;
  readonly channel: OutOfBandChannel;
  /** When the message was first queued (ms). */
  readonly since: number;
}

export class OutOfBandRecords {
  private readonly redis: Redis & RecordCommands;
  private readonly keys: LedgerKeys;

  constructor(redis: Redis, prefix: string) {
    if (!('oobRecordChannel' in redis))
      redis.defineCommand('oobRecordChannel', { numberOfKeys: 2, lua: SCRIPT });
    this.redis = redis as Redis & RecordCommands;
    this.keys = new LedgerKeys(prefix);
  }

  /** The gateway queued the message on `channel`; a channel already queued or done is left as it is. */
  queue(message: OutOfBandMessage, channel: OutOfBandChannel): Promise<RecordOutcome> {
    return this.call(
      message.tenantId,
      message.operationId,
      channel,
      'queue',
      0,
      '',
      JSON.stringify(message),
    );
  }

  /** A worker's send ended: delivered (2xx), failed with retries left, or gave up. */
  sent(
    message: Pick<OutOfBandMessage, 'tenantId' | 'operationId'>,
    channel: OutOfBandChannel,
    outcome: {
      readonly state: 'delivered' | 'failed' | 'gave_up';
      readonly attempts: number;
      readonly error?: string;
    },
  ): Promise<RecordOutcome> {
    return this.call(
      message.tenantId,
      message.operationId,
      channel,
      outcome.state,
      outcome.attempts,
      (outcome.error ?? '').slice(0, ERROR_TEXT_MAX),
    );
  }

  /**
   * Queues a message that gave up again (or, with `jobGone`, one whose job no longer runs), at most
   * `maxRedrives` times (0: no bound). Only one of several callers at once gets `ok`.
   */
  redrive(
    tenantId: string,
    operationId: string,
    channel: OutOfBandChannel,
    maxRedrives: number,
    jobGone: boolean,
  ): Promise<RecordOutcome> {
    return this.call(
      tenantId,
      operationId,
      channel,
      'redrive',
      0,
      '',
      String(maxRedrives),
      jobGone ? '1' : '0',
    );
  }

  /** One channel's record, if the message was queued on it. */
  async get(
    tenantId: string,
    operationId: string,
    channel: OutOfBandChannel,
  ): Promise<OutOfBandRecord | undefined> {
    const raw = await this.redis.hget(this.keys.operation(tenantId, operationId), `oob:${channel}`);
    return raw === null ? undefined : (JSON.parse(raw) as OutOfBandRecord);
  }

  /** The message as the gateway queued it (kept for re-drives). */
  async message(tenantId: string, operationId: string): Promise<OutOfBandMessage | undefined> {
    const raw = await this.redis.hget(this.keys.operation(tenantId, operationId), 'oob:message');
    return raw === null ? undefined : (JSON.parse(raw) as OutOfBandMessage);
  }

  /** Given-up messages first queued within [from, to], oldest first. */
  async givenUp(
    tenantId: string,
    from: number,
    to: number,
    limit: number,
  ): Promise<GivenUpEntry[]> {
    const rows = await this.redis.zrangebyscore(
      this.keys.outOfBandGivenUp(tenantId),
      from,
      to,
      'WITHSCORES',
      'LIMIT',
      0,
      limit,
    );
    const entries: GivenUpEntry[] = [];
    for (let i = 0; i + 1 < rows.length; i += 2) {
      const [operationId, channel] = (rows[i] ?? '').split(' ');
      if (operationId !== undefined && (channel === 'webhook' || channel === 'sms'))
        entries.push({ operationId, channel, since: Number(rows[i + 1]) });
    }
    return entries;
  }

  async countGivenUp(tenantId: string): Promise<number> {
    return this.redis.zcard(this.keys.outOfBandGivenUp(tenantId));
  }

  /** Forgets given-up messages first queued before `before` (they stay gave_up on their operation). */
  async forgetGivenUp(tenantId: string, before: number): Promise<number> {
    return this.redis.zremrangebyscore(this.keys.outOfBandGivenUp(tenantId), '-inf', `(${before}`);
  }

  private async call(
    tenantId: string,
    operationId: string,
    channel: OutOfBandChannel,
    mode: string,
    attempts: number,
    error: string,
    extra = '',
    jobGone = '0',
  ): Promise<RecordOutcome> {
    const reply = await this.redis.oobRecordChannel(
      this.keys.operation(tenantId, operationId),
      this.keys.outOfBandGivenUp(tenantId),
      channel,
      mode,
      attempts,
      error,
      extra,
      jobGone,
    );
    const [status, raw] = reply;
    const record =
      raw === undefined || raw === '' ? undefined : (JSON.parse(raw) as OutOfBandRecord);
    switch (status) {
      case 'OK':
        return { status: 'ok', record };
      case 'AS_IS':
        return { status: 'as_is', record };
      case 'BOUND':
        return { status: 'bound', record };
      case 'ERR_NOT_FOUND':
        return { status: 'not_found' };
      default:
        throw new Error(`unexpected out-of-band record reply ${String(status)}`);
    }
  }
}
