/**
 * The automatic re-drive: a slow periodic pass that queues again messages whose retries ran out,
 * while they are younger than a day, a bounded number of times each. It covers a receiver down for
 * hours, which the per-channel retries (35 to 45 minutes) do not. Several workers may run it at
 * once: a message is queued again by one of them only (record-channel-2.lua).
 */
import type { Logger } from '../../config/log.ts';
import type { OutOfBandQueue } from './out-of-band.ts';
import type { OutOfBandRecords } from './out-of-band-records.ts';

export interface OutOfBandRedriveSettings {
  /**
   * How often the pass runs: also the least wait between giving up and trying again. Fifteen
   * minutes keeps a receiver that is down from seeing a retry storm; below the retries' 35 to 45 minutes.
   */
  readonly intervalMs: number;
  /** Messages first queued longer ago than this are left to an operator (a day: the result is stale by then). */
  readonly maxAgeMs: number;
  /** Re-drives per message by this pass (operators are not bounded): with up to 45 min of retries each, about 5 h more. */
  readonly maxRedrives: number;
  /** Given-up messages are forgotten by the index (and the gauge) this long after they were first queued; the operation keeps its record. */
  readonly forgetAfterMs: number;
  /** Messages looked at per tenant and pass. */
  readonly batch: number;
}

export const REDRIVE_DEFAULTS: OutOfBandRedriveSettings = {
  intervalMs: 15 * 60_000,
  maxAgeMs: 24 * 3_600_000,
  maxRedrives: 6,
  forgetAfterMs: 30 * 86_400_000,
  batch: 200,
};

export interface OutOfBandRedriveOptions extends Partial<OutOfBandRedriveSettings> {
  readonly records: Pick<OutOfBandRecords, 'givenUp' | 'forgetGivenUp'>;
  readonly queue: Pick<OutOfBandQueue, 'redrive'>;
  readonly tenants: readonly string[];
  readonly log: Logger;
}

export class OutOfBandRedrive {
  private readonly settings: OutOfBandRedriveSettings;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly options: OutOfBandRedriveOptions) {
    this.settings = {
      intervalMs: options.intervalMs ?? REDRIVE_DEFAULTS.intervalMs,
      maxAgeMs: options.maxAgeMs ?? REDRIVE_DEFAULTS.maxAgeMs,
      maxRedrives: options.maxRedrives ?? REDRIVE_DEFAULTS.maxRedrives,
      forgetAfterMs: options.forgetAfterMs ?? REDRIVE_DEFAULTS.forgetAfterMs,
      batch: options.batch ?? REDRIVE_DEFAULTS.batch,
    };
  }

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.pass()
        .then(() => undefined)
        .catch((error: unknown) =>
          this.options.log.error('out-of-band re-drive pass failed', { error }),
        )
        .finally(() => (this.running = undefined));
    }, this.settings.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass over every tenant; returns how many channels were queued again. */
  async pass(now = Date.now()): Promise<number> {
    const { records, queue, tenants, log } = this.options;
    let requeued = 0;
    for (const tenantId of tenants) {
      await records.forgetGivenUp(tenantId, now - this.settings.forgetAfterMs);
      for (const entry of await records.givenUp(
        tenantId,
        now - this.settings.maxAgeMs,
        now,
        this.settings.batch,
      )) {
        const outcome = await queue.redrive(
          tenantId,
          entry.operationId,
          'automatic',
          this.settings.maxRedrives,
          entry.channel,
        );
        if (outcome[entry.channel] === 'requeued') requeued++;
        else if (outcome[entry.channel] === 'bound')
          log.warn(
            'out-of-band message gave up after its automatic re-drives; an operator may re-drive it',
            { operation_id: entry.operationId, tenant_id: tenantId, channel: entry.channel },
          );
      }
    }
    return requeued;
  }
}
