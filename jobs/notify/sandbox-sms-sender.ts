/** SMS into the bundled sandbox's message sink, so the demo and tests can show what was sent. */
import type { ChannelSender, OutOfBandMessage } from './out-of-band-message.ts';

/** The sandbox runs next to callgate; an answer slower than this is retried. */
const SANDBOX_SMS_TIMEOUT_MS = 5_000;

export class SandboxSmsSender implements ChannelSender {
  constructor(private readonly sandboxUrl: string) {}

  async send(message: OutOfBandMessage, idempotencyKey: string): Promise<void> {
    const response = await fetch(`${this.sandboxUrl}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify({
        to: message.caller ?? 'unknown',
        text: message.text,
        operation_id: message.operationId,
        session_id: message.sessionId,
      }),
      signal: AbortSignal.timeout(SANDBOX_SMS_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`sms sink answered ${response.status}`);
  }
}
