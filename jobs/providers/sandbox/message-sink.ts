/**
 * The sandbox's out-of-band sink: it stands in for an SMS gateway (`POST /messages`) and for a
 * tenant's webhook receiver (`POST /webhooks`), recording what arrives so tests can count it.
 * Like real gateways it dedupes by Idempotency-Key: a redelivered message is recorded once.
 */

export interface SinkMessage {
  readonly seq: number;
  readonly channel: 'sms' | 'webhook';
  readonly idempotencyKey?: string;
  readonly operationId?: string;
  readonly body: Readonly<Record<string, unknown>>;
  /** Raw body and signature of a webhook, so a receiver-side check can be replayed by tests. */
  readonly raw?: string;
  readonly signature?: string;
  readonly at: number;
  /** How many times the same key was delivered (1 = once). */
  deliveries: number;
}

export class MessageSink {
  private messages: SinkMessage[] = [];
  private readonly byKey = new Map<string, SinkMessage>();
  private seq = 0;

  receive(
    channel: SinkMessage['channel'],
    body: Readonly<Record<string, unknown>>,
    headers: { idempotencyKey?: string; signature?: string; raw?: string },
  ): { message: SinkMessage; duplicate: boolean } {
    const key = headers.idempotencyKey;
    const existing = key === undefined ? undefined : this.byKey.get(`${channel}:${key}`);
    if (existing) {
      existing.deliveries++;
      return { message: existing, duplicate: true };
    }
    const message: SinkMessage = {
      seq: ++this.seq,
      channel,
      idempotencyKey: key,
      operationId: typeof body.operation_id === 'string' ? body.operation_id : undefined,
      body,
      raw: headers.raw,
      signature: headers.signature,
      at: Date.now(),
      deliveries: 1,
    };
    this.messages.push(message);
    if (key !== undefined) this.byKey.set(`${channel}:${key}`, message);
    return { message, duplicate: false };
  }

  list(filter: { operationId?: string; channel?: string } = {}): SinkMessage[] {
    return this.messages.filter(
      (m) =>
        (filter.operationId === undefined || m.operationId === filter.operationId) &&
        (filter.channel === undefined || m.channel === filter.channel),
    );
  }

  reset(): void {
    this.messages = [];
    this.byKey.clear();
    this.seq = 0;
  }
}
