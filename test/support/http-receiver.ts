/**
 * A local HTTP receiver standing in for a tenant's webhook or an SMS API: it records every request
 * (headers and raw body), can be taken down (connections refused) and brought back on the same
 * port, or made to answer a status. Like a real receiver it dedupes by Idempotency-Key.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly raw: string;
  readonly status: number;
}

export class HttpReceiver {
  readonly requests: ReceivedRequest[] = [];
  /** The status requests are answered with, once `answers` (one status per request) is used up. */
  status = 200;
  answers: number[] = [];
  private server: Server | undefined;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens (again) on its port; the first time on a free one. */
  async up(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const status = this.answers.shift() ?? this.status;
        this.requests.push({
          path: req.url ?? '',
          headers: req.headers,
          raw: Buffer.concat(chunks).toString('utf8'),
          status,
        });
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening: senders get connection refused until `up()`. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Requests with this idempotency key that were answered 2xx: what the receiver recorded. */
  accepted(idempotencyKey: string): ReceivedRequest[] {
    return this.requests.filter(
      (r) => r.headers['idempotency-key'] === idempotencyKey && r.status >= 200 && r.status < 300,
    );
  }

  withKey(idempotencyKey: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.headers['idempotency-key'] === idempotencyKey);
  }
}
