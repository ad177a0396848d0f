/**
 * An HTTP proxy between the workers and the sandbox systems of record that makes the network's
 * faults, which the sandbox's own fault rules (faults at the provider) cannot: a request held on
 * the way for longer than the client waits (it reaches the provider late, after the client gave
 * up), an answer lost after the provider acted on the request, a 5xx from a gateway in between
 * either before forwarding or after the provider committed. Only provider requests (POSTs to an
 * operation) are touched; lookups, cancels and the admin and message endpoints pass.
 */
import {
  createServer,
  request,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';

export type ProxyMode =
  | { readonly kind: 'pass' }
  /** Held this long before forwarding; the client has given up by then, the provider still acts. */
  | { readonly kind: 'hold'; readonly holdMs: number }
  /** Answered with this status without forwarding (nothing reached the provider). */
  | { readonly kind: 'reject'; readonly status: number }
  /** Forwarded; the provider's answer is thrown away and the client's connection cut. */
  | { readonly kind: 'drop_answer' }
  /** Forwarded; the provider's answer is replaced by this status (a commit the client sees as a 5xx). */
  | { readonly kind: 'error_after_forward'; readonly status: number };

export class FaultProxy {
  private readonly server: Server;
  private mode: ProxyMode = { kind: 'pass' };
  private readonly held = new Set<NodeJS.Timeout>();
  /** Requests the current and earlier modes acted on, by mode kind. */
  readonly applied: Record<string, number> = {};
  url = '';

  constructor(private readonly targetUrl: string) {
    this.server = createServer((req, res) => this.handle(req, res));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = this.server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    return this.url;
  }

  setMode(mode: ProxyMode): void {
    this.mode = mode;
  }

  async close(): Promise<void> {
    for (const timer of this.held) clearTimeout(timer);
    this.held.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const mode = isProviderRequest(req) ? this.mode : ({ kind: 'pass' } as const);
      if (mode.kind !== 'pass') this.applied[mode.kind] = (this.applied[mode.kind] ?? 0) + 1;
      switch (mode.kind) {
        case 'reject':
          res.writeHead(mode.status, { 'content-type': 'text/plain' });
          res.end('upstream unavailable');
          return;
        case 'hold': {
          const timer = setTimeout(() => {
            this.held.delete(timer);
            // The client has long gone; what matters is that the provider receives it now.
            this.forward(req, body, (upstream) => {
              upstream.resume();
              res.destroy();
            });
          }, mode.holdMs);
          this.held.add(timer);
          return;
        }
        case 'drop_answer':
          this.forward(req, body, (upstream) => {
            upstream.resume();
            upstream.on('end', () => res.destroy());
          });
          return;
        case 'error_after_forward':
          this.forward(req, body, (upstream) => {
            upstream.resume();
            upstream.on('end', () => {
              res.writeHead(mode.status, { 'content-type': 'text/plain' });
              res.end('bad gateway');
            });
          });
          return;
        case 'pass':
          this.forward(req, body, (upstream) => {
            res.writeHead(upstream.statusCode ?? 502, upstream.headers);
            upstream.pipe(res);
          });
          return;
      }
    });
  }

  private forward(
    req: IncomingMessage,
    body: Buffer,
    onAnswer: (upstream: IncomingMessage) => void,
  ): void {
    const target = new URL(req.url ?? '/', this.targetUrl);
    const headers = { ...req.headers, host: target.host, 'content-length': String(body.length) };
    const out = request(target, { method: req.method, headers }, onAnswer);
    out.on('error', () => undefined);
    out.end(body);
  }
}

function isProviderRequest(req: IncomingMessage): boolean {
  const parts =
    (req.url ?? '/')
      .split('?')[0]
      ?.split('/')
      .filter((p) => p !== '') ?? [];
  return (
    req.method === 'POST' &&
    (parts[0] === 'payments' || parts[0] === 'bookings') &&
    parts.length === 2
  );
}
