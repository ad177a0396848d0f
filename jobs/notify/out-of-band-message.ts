/** The message a result becomes when it goes out of band, and how each channel's send is named. */
import type { NotifyConfig } from '../../config/schema.ts';
import type { OutOfBandChannel } from '../ledger/operation.ts';

export const NOTIFY_QUEUE = 'ops-notify';
/** The custom backoff type of channel jobs: the worker's strategy doubles the delay up to the job's cap. */
export const OUT_OF_BAND_BACKOFF = 'oob-doubling';

export interface OutOfBandMessage {
  readonly operationId: string;
  readonly tenantId: string;
  readonly sessionId: string;
  readonly caller?: string;
  readonly state: string;
  readonly text: string;
  readonly reasons: readonly string[];
}

/** One channel's send of a message: a job of its own, retried on its own. */
export interface ChannelJob {
  readonly message: OutOfBandMessage;
  readonly channel: OutOfBandChannel;
  /** Cap of the doubling retry delay (the first delay is the job's backoff delay). */
  readonly maxBackoffMs: number;
}

/** Sends one channel's message; resolves when the receiver took it (2xx), throws otherwise. */
export interface ChannelSender {
  send(message: OutOfBandMessage, idempotencyKey: string): Promise<void>;
}

/** The same for every send of an operation's message on a channel, so a receiver records it once. */
export function idempotencyKey(operationId: string, channel: OutOfBandChannel): string {
  return `oob-${operationId}-${channel}`;
}

/** The BullMQ job id of a channel's send (one per operation and channel). */
export function channelJobId(operationId: string, channel: OutOfBandChannel): string {
  return `oob-${operationId}-${channel}`;
}

/** The channels a tenant's messages go out on, in the order they are queued. */
export function channelsOf(notify: NotifyConfig): OutOfBandChannel[] {
  if (!notify.outOfBand) return [];
  const channels: OutOfBandChannel[] = [];
  if (notify.webhookUrl !== undefined) channels.push('webhook');
  if (notify.sms !== 'none') channels.push('sms');
  return channels;
}

/** Retry n (1-based) waits backoffMs * 2^(n-1), capped, less up to a fifth at random so that a backlog does not return in one burst. */
export function retryDelayMs(
  attemptsMade: number,
  backoffMs: number,
  maxBackoffMs: number,
  random: () => number = Math.random,
): number {
  const full = Math.min(maxBackoffMs, backoffMs * 2 ** Math.max(0, attemptsMade - 1));
  return Math.round(full * (1 - 0.2 * random()));
}
