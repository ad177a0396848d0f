/** The tenant's signed webhook: see docs/out-of-band.md for the request and how to verify it. */
import { createHmac } from 'node:crypto';
import type { ChannelSender, OutOfBandMessage } from './out-of-band-message.ts';

/** A receiver that has not answered within this long is retried (with the same idempotency key). */
export const WEBHOOK_TIMEOUT_MS = 5_000;

/** `t=<unix ms>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the receiver recomputes it with the shared secret. */
export function signWebhook(secret: string, body: string, timestamp: number): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${mac}`;
}

export class WebhookSender implements ChannelSender {
  constructor(
    private readonly url: string,
    /** The signing secret, read when sending: a variable set later fixes the backlog. */
    private readonly secret: () => string | undefined,
  ) {}

  async send(message: OutOfBandMessage, idempotencyKey: string): Promise<void> {
    const secret = this.secret();
    if (secret === undefined || secret === '')
      throw new Error('the webhook signing secret is not set');
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
    const response = await fetch(this.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
        'x-callgate-signature': signWebhook(secret, body, Date.now()),
      },
      body,
      signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`webhook answered ${response.status}`);
  }
}
