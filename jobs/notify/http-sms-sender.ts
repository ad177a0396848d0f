/**
 * A generic SMS API (`notify.sms: { type: http, ... }`): one POST per message, its body the
 * configured template with the message's fields filled in, a bearer token from the environment and
 * the channel's Idempotency-Key, so a retried send is recorded once by an API that dedupes by it.
 */
import type { HttpSmsConfig } from '../../config/schema.ts';
import type { ChannelSender, OutOfBandMessage } from './out-of-band-message.ts';

export class HttpSmsSender implements ChannelSender {
  constructor(
    private readonly config: HttpSmsConfig,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  async send(message: OutOfBandMessage, idempotencyKey: string): Promise<void> {
    const token = this.env[this.config.tokenEnv];
    if (token === undefined || token === '')
      throw new Error(`the SMS API token variable ${this.config.tokenEnv} is not set`);
    const response = await fetch(this.config.url, {
      method: 'POST',
      headers: {
        'content-type': this.config.contentType,
        authorization: `Bearer ${token}`,
        'idempotency-key': idempotencyKey,
      },
      body: renderSmsBody(this.config, message),
      signal: AbortSignal.timeout(this.config.timeoutMs),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`SMS API answered ${response.status}`);
  }
}

/** Fills the template's placeholders, each escaped for the body's content type. */
export function renderSmsBody(
  config: Pick<HttpSmsConfig, 'body' | 'contentType'>,
  message: OutOfBandMessage,
): string {
  const values: Record<string, string> = {
    to: message.caller ?? '',
    text: message.text,
    operation_id: message.operationId,
    tenant_id: message.tenantId,
    session_id: message.sessionId,
    state: message.state,
  };
  const escape =
    config.contentType === 'application/json'
      ? (value: string) => JSON.stringify(value).slice(1, -1)
      : encodeURIComponent;
  return config.body.replace(/\{([a-z_]+)\}/g, (placeholder, name: string) =>
    name in values ? escape(values[name] ?? '') : placeholder,
  );
}
