/**
 * Out-of-band delivery: a result the caller can no longer hear (hung up, transferred, gateway gone)
 * is sent as a message. The gateway enqueues it; workers send it with retries. One message per
 * operation: the job id is derived from the operation id and every send carries the same
 * Idempotency-Key, so a retried send is recorded once by the receiver.
 */
import { createHmac } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../../config/log.ts';
import { counter } from '../../config/metrics.ts';
import type { TenantConfig } from '../../config/schema.ts';
import { bullPrefix } from '../queues/operation-queues.ts';

export const NOTIFY_QUEUE = 'ops-notify';

const deliveries = counter({
  name: 'callgate_out_of_band_deliveries_total',
  help: 'Out-of-band result messages by channel and outcome (sent, failed_attempt, gave_up).',
  labelNames: ['channel', 'outcome'],
});

export interface OutOfBandMessage {
  readonly operationId: string;
  readonly tenantId: string;
  readonly sessionId: string;
  readonly caller?: string;
  readonly state: string;
  readonly text: string;
  readonly reasons: readonly string[];
}

/** Sends SMS; the sandbox adapter posts to the sandbox sink, a real one to a carrier API. */
export interface SmsSender {
  send(message: OutOfBandMessage, idempotencyKey: string): Promise<void>;
}

export class SandboxSmsSender implements SmsSender {
  constructor(private readonly sandboxUrl: string) {}

  async send(message: OutOfBandMessage, idempotencyKey: string): Promise<void> {
    const response = await fetch(`${this.sandboxUrl}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify({ to: message.caller ?? 'unknown', text: message.text, operation_id: message.operationId, session_id: message.sessionId }),
      signal: AbortSignal.timeout(5_000),
    });
    if (!response.ok) throw new Error(`sms sink answered ${response.status}`);
  }
}

/** `t=<unix ms>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the receiver recomputes it with the shared secret. */
export function signWebhook(secret: string, body: string, timestamp: number): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${mac}`;
}

export class OutOfBandQueue {
  private readonly queue: Queue<OutOfBandMessage>;

  constructor(connection: Redis, prefix: string) {
    this.queue = new Queue<OutOfBandMessage>(NOTIFY_QUEUE, { connection, prefix: bullPrefix(prefix) });
  }

  /** Enqueues the message of an operation; a second call for the same operation adds nothing. */
  async enqueue(message: OutOfBandMessage): Promise<void> {
    await this.queue.add('deliver', message, {
      jobId: `oob-${message.operationId}`,
      attempts: 8,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: 7 * 86_400 },
      removeOnFail: { age: 30 * 86_400 },
    });
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

export interface OutOfBandWorkerOptions {
  readonly connection: Redis;
  readonly prefix: string;
  readonly tenants: ReadonlyMap<string, TenantConfig>;
  readonly sms?: SmsSender;
  readonly env?: NodeJS.ProcessEnv;
  readonly log: Logger;
}

export class OutOfBandWorker {
  private worker: Worker<OutOfBandMessage> | undefined;

  constructor(private readonly options: OutOfBandWorkerOptions) {}

  start(): void {
    if (this.options.sms === undefined) {
      const wanting = [...this.options.tenants.values()].filter((t) => t.notify.sms === 'sandbox').map((t) => t.id);
      if (wanting.length > 0) {
        this.options.log.error('tenants send results by SMS through the sandbox sink, but no sandbox is reachable: set sandbox.enabled, or sandbox.url to the one running elsewhere', { tenants: wanting.slice(0, 20) });
      }
    }
    this.worker = new Worker<OutOfBandMessage>(NOTIFY_QUEUE, (job) => this.deliver(job), {
      connection: this.options.connection,
      prefix: bullPrefix(this.options.prefix),
      concurrency: 8,
    });
    this.worker.on('error', (error) => this.options.log.error('out-of-band worker error', { error }));
    this.worker.on('failed', (job, error) => {
      const final = job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1);
      deliveries.labels('any', final ? 'gave_up' : 'failed_attempt').inc();
      this.options.log.warn('out-of-band delivery failed', { operation_id: job?.data.operationId, error: error.message, final });
    });
  }

  private async deliver(job: Job<OutOfBandMessage>): Promise<string> {
    const message = job.data;
    const tenant = this.options.tenants.get(message.tenantId);
    const key = `oob-${message.operationId}`;
    // A channel the tenant asked for that cannot be used fails the job before anything is sent.
    if (tenant?.notify.sms === 'sandbox' && this.options.sms === undefined) throw new Error('no SMS sender: no sandbox is reachable (sandbox.enabled or sandbox.url)');
    const channels: string[] = [];
    const webhookUrl = tenant?.notify.webhookUrl;
    if (webhookUrl !== undefined) {
      const secretEnv = tenant?.notify.webhookSecretEnv;
      const secret = secretEnv === undefined ? undefined : (this.options.env ?? process.env)[secretEnv];
      if (secret === undefined || secret === '') throw new Error(`webhook secret ${secretEnv ?? ''} is not set`);
      const body = JSON.stringify({
        type: 'operation.result',
        operation_id: message.operationId,
        tenant_id: message.tenantId,
        session_id: message.sessionId,
        caller: message.caller,
        state: message.state,
        text: message.text,
        reasons: message.reasons,
      });
      const response = await fetch(webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-callgate-signature': signWebhook(secret, body, Date.now()) },
        body,
        signal: AbortSignal.timeout(5_000),
      });
      if (!response.ok) throw new Error(`webhook answered ${response.status}`);
      deliveries.labels('webhook', 'sent').inc();
      channels.push('webhook');
    }
    if (tenant?.notify.sms === 'sandbox' && this.options.sms !== undefined) {
      await this.options.sms.send(message, key);
      deliveries.labels('sms', 'sent').inc();
      channels.push('sms');
    }
    return channels.join(',') || 'no channel';
  }

  async close(): Promise<void> {
    await this.worker?.close();
  }
}
