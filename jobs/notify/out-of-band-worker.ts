/**
 * Sends out-of-band messages: one job per operation and channel, retried with doubling delays up to
 * the tenant's cap, each send with the channel's idempotency key. What the receiver answered is
 * recorded on the operation (delivered on a 2xx, failed while retries remain, gave_up when they ran
 * out), before the job itself moves on.
 */
import { Worker, type Job, type MinimalJob } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../../config/log.ts';
import { counter } from '../../config/metrics.ts';
import type { TenantConfig } from '../../config/schema.ts';
import type { OutOfBandChannel } from '../ledger/operation.ts';
import { bullPrefix } from '../queues/operation-queues.ts';
import { HttpSmsSender } from './http-sms-sender.ts';
import {
  idempotencyKey,
  NOTIFY_QUEUE,
  OUT_OF_BAND_BACKOFF,
  retryDelayMs,
  type ChannelJob,
  type ChannelSender,
} from './out-of-band-message.ts';
import type { OutOfBandQueue } from './out-of-band.ts';
import { OutOfBandRedrive, type OutOfBandRedriveSettings } from './out-of-band-redrive.ts';
import { OutOfBandRecords } from './out-of-band-records.ts';
import { WebhookSender } from './webhook-sender.ts';
import { closeWorker } from '../queues/close-worker.ts';

/** Sends at once per worker process: sends wait on receivers, not on CPU. */
const SEND_CONCURRENCY = 8;

const deliveries = counter({
  name: 'callgate_out_of_band_deliveries_total',
  help: 'Out-of-band result sends by channel and outcome (sent: the receiver answered 2xx, failed_attempt: retried later, gave_up: no retry left).',
  labelNames: ['channel', 'outcome'],
});

/** The delay before retry `attemptsMade` of a channel job: its first delay doubled, up to its cap. */
function channelBackoff(
  attemptsMade: number,
  type?: string,
  _error?: Error,
  job?: MinimalJob,
): number {
  if (type !== OUT_OF_BAND_BACKOFF || !job) return 0;
  const { backoff } = job.opts;
  const first = typeof backoff === 'object' ? (backoff.delay ?? 0) : 0;
  return retryDelayMs(attemptsMade, first, (job.data as ChannelJob).maxBackoffMs);
}

export interface OutOfBandWorkerOptions {
  readonly connection: Redis;
  readonly prefix: string;
  readonly tenants: ReadonlyMap<string, TenantConfig>;
  /** Queues re-driven messages (the automatic pass). */
  readonly queue: Pick<OutOfBandQueue, 'redrive'>;
  /** The sandbox sink, for tenants with `notify.sms: sandbox` (config load refuses them without one). */
  readonly sandboxSms?: ChannelSender;
  readonly env?: NodeJS.ProcessEnv;
  readonly log: Logger;
  /** The automatic re-drive's timings (production defaults in out-of-band-redrive.ts). */
  readonly redrive?: Partial<OutOfBandRedriveSettings>;
}

export class OutOfBandWorker {
  private worker: Worker<ChannelJob> | undefined;
  private readonly records: OutOfBandRecords;
  private readonly redrive: OutOfBandRedrive;

  constructor(private readonly options: OutOfBandWorkerOptions) {
    this.records = new OutOfBandRecords(options.connection, options.prefix);
    this.redrive = new OutOfBandRedrive({
      records: this.records,
      queue: options.queue,
      tenants: [...options.tenants.keys()],
      log: options.log,
      ...options.redrive,
    });
  }

  start(): void {
    this.worker = new Worker<ChannelJob>(NOTIFY_QUEUE, (job) => this.deliver(job), {
      connection: this.options.connection,
      prefix: bullPrefix(this.options.prefix),
      concurrency: SEND_CONCURRENCY,
      settings: { backoffStrategy: channelBackoff },
    });
    this.worker.on('error', (error) =>
      this.options.log.error('out-of-band worker error', { error }),
    );
    this.redrive.start();
  }

  /** One send; throws (to be retried) unless the receiver answered 2xx. */
  private async deliver(job: Job<ChannelJob>): Promise<OutOfBandChannel> {
    const { message, channel } = job.data;
    const attempts = job.attemptsMade + 1;
    // A job run again after its message was delivered (a stalled worker's job) sends nothing.
    if (
      (await this.records.get(message.tenantId, message.operationId, channel))?.state ===
      'delivered'
    )
      return channel;
    try {
      await this.sender(message.tenantId, channel).send(
        message,
        idempotencyKey(message.operationId, channel),
      );
    } catch (error) {
      const final = attempts >= (job.opts.attempts ?? 1);
      const reason = error instanceof Error ? error.message : String(error);
      deliveries.labels(channel, final ? 'gave_up' : 'failed_attempt').inc();
      this.options.log.warn(final ? 'out-of-band message gave up' : 'out-of-band send failed', {
        operation_id: message.operationId,
        tenant_id: message.tenantId,
        channel,
        attempts,
        error: reason,
      });
      await this.records.sent(message, channel, {
        state: final ? 'gave_up' : 'failed',
        attempts,
        error: reason,
      });
      throw error;
    }
    deliveries.labels(channel, 'sent').inc();
    // A failure here retries the send; the receiver dedupes it by the idempotency key.
    await this.records.sent(message, channel, { state: 'delivered', attempts });
    return channel;
  }

  private sender(tenantId: string, channel: OutOfBandChannel): ChannelSender {
    const notify = this.options.tenants.get(tenantId)?.notify;
    if (!notify) throw new Error(`tenant ${tenantId} is not configured here`);
    const env = this.options.env ?? process.env;
    if (channel === 'webhook') {
      if (notify.webhookUrl === undefined) throw new Error(`tenant ${tenantId} has no webhookUrl`);
      const secretEnv = notify.webhookSecretEnv;
      return new WebhookSender(notify.webhookUrl, () =>
        secretEnv === undefined ? undefined : env[secretEnv],
      );
    }
    if (typeof notify.sms === 'object') return new HttpSmsSender(notify.sms, env);
    if (notify.sms === 'sandbox' && this.options.sandboxSms) return this.options.sandboxSms;
    throw new Error(`tenant ${tenantId} has no usable SMS channel (sms: ${String(notify.sms)})`);
  }

  async close(): Promise<void> {
    await this.redrive.stop();
    if (this.worker !== undefined) await closeWorker(this.worker);
  }
}
