/**
 * The tenant's webhook endpoint for out-of-band results: records every message it accepted (by
 * operation id and idempotency key) and can be taken down for a while (its port refuses
 * connections, as a receiver that is down does) and brought back on the same port.
 */
import { createServer, type Server } from 'node:http';

export interface ReceivedWebhook {
  readonly operationId: string;
  readonly idempotencyKey: string | undefined;
  readonly at: number;
}

export class WebhookReceiver {
  private server: Server | undefined;
  private port = 0;
  readonly received: ReceivedWebhook[] = [];

  get url(): string {
    return `http://127.0.0.1:${this.port}/results`;
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        let operationId = '';
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            operation_id?: unknown;
          };
          operationId = typeof body.operation_id === 'string' ? body.operation_id : '';
        } catch {
          // counted with an empty operation id: a malformed message is a finding too
        }
        const key = req.headers['idempotency-key'];
        this.received.push({
          operationId,
          idempotencyKey: typeof key === 'string' ? key : undefined,
          at: Date.now(),
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address !== null ? address.port : 0;
    this.server = server;
  }

  /** Down: the port refuses connections until start() again. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  get up(): boolean {
    return this.server !== undefined;
  }
}
