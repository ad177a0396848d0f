/**
 * An HTTP proxy on loopback in front of a system of record that can hold a request on its way (a
 * slow or congested proxy): the client's timeout passes, and the request reaches the backend only
 * when the test releases it. Answers of held requests still go back on their own connections.
 */
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ForwardedAnswer {
  readonly path: string;
  readonly status: number;
  readonly body: string;
}

export interface HoldingProxy {
  readonly url: string;
  /** Requests being held now. */
  held(): number;
  /** Forwards every held request now. */
  release(): void;
  /** Answers the backend gave to requests that were held, once they were forwarded. */
  readonly releasedAnswers: ForwardedAnswer[];
  close(): Promise<void>;
}

/**
 * `target()`: the backend's base URL, read per request (it may be known only after the proxy is up).
 * `hold(method, path, n)`: whether the n-th request (1-based) of that method, path and operation
 * (the X-Callgate-Operation-Id header) is held.
 */
export async function startHoldingProxy(
  target: () => string,
  hold: (method: string, path: string, n: number) => boolean,
): Promise<HoldingProxy> {
  const counts = new Map<string, number>();
  const waiting: (() => void)[] = [];
  const releasedAnswers: ForwardedAnswer[] = [];
  const forward = (req: IncomingMessage, body: Buffer, res: ServerResponse, held: boolean) => {
    const base = target();
    const upstream = httpRequest(
      `${base}${req.url ?? '/'}`,
      { method: req.method, headers: { ...req.headers, host: new URL(base).host } },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          if (held)
            releasedAnswers.push({
              path: req.url ?? '/',
              status: answer.statusCode ?? 0,
              body: text,
            });
          if (!res.destroyed) {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(text);
          }
        });
      },
    );
    upstream.on('error', () => res.destroy());
    upstream.end(body);
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const key = `${req.method ?? ''} ${req.url ?? ''} ${String(req.headers['x-callgate-operation-id'] ?? '')}`;
      const n = (counts.get(key) ?? 0) + 1;
      counts.set(key, n);
      const body = Buffer.concat(chunks);
      if (hold(req.method ?? '', req.url ?? '', n))
        waiting.push(() => forward(req, body, res, true));
      else forward(req, body, res, false);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held: () => waiting.length,
    release: () => {
      for (const send of waiting.splice(0)) send();
    },
    releasedAnswers,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
