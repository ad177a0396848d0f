/** What the sandbox's out-of-band sink (SMS and webhooks) recorded for an operation. */
import type { SinkMessage } from '../../jobs/providers/sandbox/message-sink.ts';
import { waitFor } from './processes.ts';

export async function sandboxMessages(
  sandboxUrl: string,
  operationId: string,
): Promise<SinkMessage[]> {
  const response = await fetch(
    `${sandboxUrl}/admin/messages?operation_id=${encodeURIComponent(operationId)}`,
  );
  if (!response.ok) throw new Error(`the sandbox answered ${response.status} for its messages`);
  return ((await response.json()) as { messages: SinkMessage[] }).messages;
}

/**
 * Waits for the operation's first out-of-band message, then `settleMs` longer so that a second
 * sending would show, and returns what the sink holds.
 */
export async function messagesOnceSettled(
  sandboxUrl: string,
  operationId: string,
  options: { timeoutMs?: number; settleMs?: number } = {},
): Promise<SinkMessage[]> {
  await waitFor(
    async () => ((await sandboxMessages(sandboxUrl, operationId)).length > 0 ? true : undefined),
    options.timeoutMs ?? 10_000,
    'the out-of-band message',
  );
  await new Promise((resolve) => setTimeout(resolve, options.settleMs ?? 1_500));
  return sandboxMessages(sandboxUrl, operationId);
}
