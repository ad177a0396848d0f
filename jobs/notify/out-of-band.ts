/**
 * Out-of-band delivery: a result the caller can no longer hear (hung up, transferred, gateway gone)
 * is sent as a message, one job per channel (`oob-<operation id>-<channel>`), so a receiver that is
 * down delays only its own channel. The gateway queues it and records `queued` per channel on the
 * operation; workers (out-of-band-worker.ts) send it and record what the receiver answered. A
 * message whose retries ran out is re-driven by an operator (POST /v1/operations/:id/notify/redrive)
 * or by the slow automatic pass (out-of-band-redrive.ts). See docs/out-of-band.md.
 *
 *   gateway: queue oob:<channel> -> add job ---> worker: send -> oob:<channel> delivered | failed | gave_up
 *   re-drive: gave_up -> queued (one caller wins) -> replace the failed job -> worker ...
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { counter, gauge } from '../../config/metrics.ts';
import type { TenantConfig } from '../../config/schema.ts';
import { OUT_OF_BAND_CHANNELS, type OutOfBandChannel } from '../ledger/operation.ts';
import { bullPrefix } from '../queues/operation-queues.ts';
import {
  channelJobId,
  channelsOf,
  NOTIFY_QUEUE,
  OUT_OF_BAND_BACKOFF,
  type ChannelJob,
  type OutOfBandMessage,
} from './out-of-band-message.ts';
import { OutOfBandRecords } from './out-of-band-records.ts';

/** Finished sends are kept this long, so a late duplicate of the same operation's message finds its job. */
const KEEP_COMPLETED_SECONDS = 7 * 86_400;
/** Failed (given-up) sends are kept as long as the given-up index remembers them (see out-of-band-redrive.ts). */
const KEEP_FAILED_SECONDS = 30 * 86_400;
/**
 * How long a re-drive waits for a send that is just ending (its job still active when the message
 * was marked given up) before replacing the job; sends time out well within this.
 */
const REPLACE_WAIT_MS = 10_000;
const REPLACE_POLL_MS = 50;

const redrives = counter({
  name: 'callgate_out_of_band_redrives_total',
  help: 'Out-of-band messages queued again after they gave up, by channel and trigger (operator, automatic).',
  labelNames: ['channel', 'trigger'],
});

const givenUp = gauge({
  name: 'callgate_out_of_band_given_up',
  help: 'Out-of-band messages whose retries ran out and that no channel has delivered since, by tenant.',
  labelNames: ['tenant'],
});

/** What a re-drive did for one channel. */
export type RedriveOutcome = 'requeued' | 'delivered' | 'in_progress' | 'bound';

export interface OutOfBandQueueOptions {
  readonly connection: Redis;
  readonly prefix: string;
  readonly tenants: ReadonlyMap<string, TenantConfig>;
}

export class OutOfBandQueue {
  private readonly queue: Queue<ChannelJob>;
  readonly records: OutOfBandRecords;

  constructor(private readonly options: OutOfBandQueueOptions) {
    this.queue = new Queue<ChannelJob>(NOTIFY_QUEUE, {
      connection: options.connection,
      prefix: bullPrefix(options.prefix),
    });
    this.records = new OutOfBandRecords(options.connection, options.prefix);
  }

  /**
   * Queues the message on each of the tenant's channels and records it `queued` on the operation.
   * A channel already queued keeps its record; one already delivered or given up is not sent again
   * (a given-up message is re-driven, see `redrive`). Returns the channels the message is on.
   */
  async enqueue(message: OutOfBandMessage): Promise<readonly OutOfBandChannel[]> {
    const tenant = this.options.tenants.get(message.tenantId);
    if (!tenant) return [];
    const channels = channelsOf(tenant.notify);
    for (const channel of channels) {
      const { record } = await this.records.queue(message, channel);
      if (record?.state === 'delivered' || record?.state === 'gave_up') continue;
      await this.add(tenant, message, channel);
    }
    return channels;
  }

  /**
   * Queues again the operation's channels that gave up (or whose job is gone while still marked
   * queued or failed), each at most `maxRedrives` times (0: no bound). A channel still being sent
   * is left alone.
   */
  async redrive(
    tenantId: string,
    operationId: string,
    trigger: 'operator' | 'automatic',
    maxRedrives = 0,
    only?: OutOfBandChannel,
  ): Promise<Partial<Record<OutOfBandChannel, RedriveOutcome>>> {
    const tenant = this.options.tenants.get(tenantId);
    const message = await this.records.message(tenantId, operationId);
    const outcomes: Partial<Record<OutOfBandChannel, RedriveOutcome>> = {};
    if (!tenant || !message) return outcomes;
    for (const channel of OUT_OF_BAND_CHANNELS) {
      if (only !== undefined && channel !== only) continue;
      const jobState = await this.queue.getJobState(channelJobId(operationId, channel));
      const outcome = await this.records.redrive(
        tenantId,
        operationId,
        channel,
        maxRedrives,
        jobState === 'failed' || jobState === 'unknown',
      );
      if (outcome.status === 'not_found' || outcome.record === undefined) continue;
      if (outcome.status === 'ok') {
        await this.replace(tenant, message, channel);
        redrives.labels(channel, trigger).inc();
        outcomes[channel] = 'requeued';
      } else if (outcome.status === 'bound') {
        outcomes[channel] = 'bound';
      } else {
        outcomes[channel] = outcome.record.state === 'delivered' ? 'delivered' : 'in_progress';
      }
    }
    return outcomes;
  }

  /** Refreshes the given-up gauge from Redis (called on scrape). */
  async refreshMetrics(): Promise<void> {
    for (const tenantId of this.options.tenants.keys())
      givenUp.labels(tenantId).set(await this.records.countGivenUp(tenantId));
  }

  async close(): Promise<void> {
    await this.queue.close();
  }

  private async add(
    tenant: TenantConfig,
    message: OutOfBandMessage,
    channel: OutOfBandChannel,
  ): Promise<void> {
    const { retry } = tenant.notify;
    await this.queue.add(
      channel,
      { message, channel, maxBackoffMs: retry.maxBackoffMs },
      {
        jobId: channelJobId(message.operationId, channel),
        attempts: retry.attempts,
        backoff: { type: OUT_OF_BAND_BACKOFF, delay: retry.backoffMs },
        removeOnComplete: { age: KEEP_COMPLETED_SECONDS },
        removeOnFail: { age: KEEP_FAILED_SECONDS },
      },
    );
  }

  /**
   * BullMQ ignores an add whose job id exists, so the finished job is removed first; a job still
   * active (its last send is ending) is waited for.
   */
  private async replace(
    tenant: TenantConfig,
    message: OutOfBandMessage,
    channel: OutOfBandChannel,
  ): Promise<void> {
    const jobId = channelJobId(message.operationId, channel);
    const until = Date.now() + REPLACE_WAIT_MS;
    for (;;) {
      const state = await this.queue.getJobState(jobId);
      if (state === 'unknown') break;
      if (state === 'failed' || state === 'completed') {
        await this.queue.remove(jobId);
        continue;
      }
      // Waiting or delayed: it will run, nothing to replace.
      if (state !== 'active') return;
      if (Date.now() > until)
        throw new Error(`out-of-band job ${jobId} is still active; re-drive it again later`);
      await new Promise((resolve) => setTimeout(resolve, REPLACE_POLL_MS));
    }
    await this.add(tenant, message, channel);
  }
}
