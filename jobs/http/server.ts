/**
 * The HTTP surface both roles share: GET /healthz (liveness), GET /readyz (every readiness check
 * passes, else 503 with the failing ones), GET /metrics (the one registry), and JSON routes that
 * modules register (the operations admin API here, calls in the gateway).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CallgateError, isCallgateError } from '../../config/errors.ts';
import { rootLogger } from '../../config/log.ts';
import {
  OPENMETRICS_CONTENT_TYPE,
  openMetricsText,
  registry,
  wantsOpenMetrics,
} from '../../config/metrics.ts';

/** Request bodies above this are refused: the admin API takes small JSON documents only. */
const MAX_BODY_BYTES = 1_048_576;

export interface ReadinessCheck {
  readonly name: string;
  /** Resolves to undefined when ready, or a reason when not. */
  check(): Promise<string | undefined>;
}

export interface RouteRequest {
  readonly method: string;
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly body: unknown;
}

export interface RouteResponse {
  readonly status?: number;
  /** Serialised as JSON unless `contentType` says otherwise (then it must be a string). */
  readonly body: unknown;
  readonly contentType?: string;
}

export type RouteHandler = (request: RouteRequest) => Promise<RouteResponse>;

interface Route {
  readonly method: string;
  readonly pattern: RegExp;
  readonly names: readonly string[];
  readonly handler: RouteHandler;
}

export class HttpServer {
  private readonly server: Server;
  private readonly routes: Route[] = [];
  private readonly checks: ReadinessCheck[] = [];
  private readonly refreshers: (() => Promise<void>)[] = [];

  constructor() {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        rootLogger().error('http handler failed', { error, path: req.url });
        if (!res.headersSent)
          sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
        else res.destroy();
      });
    });
    // Slow clients must not hold sockets open forever.
    this.server.headersTimeout = 10_000;
    this.server.requestTimeout = 30_000;
    this.server.keepAliveTimeout = 5_000;
  }

  addReadinessCheck(check: ReadinessCheck): void {
    this.checks.push(check);
  }

  /** Runs before each scrape, for gauges read from elsewhere (queue depths). */
  addMetricsRefresher(refresh: () => Promise<void>): void {
    this.refreshers.push(refresh);
  }

  /** Registers a route; `:name` segments become params. */
  route(method: string, path: string, handler: RouteHandler): void {
    const names: string[] = [];
    const source = path
      .split('/')
      .map((segment) => {
        if (segment.startsWith(':')) {
          names.push(segment.slice(1));
          return '([^/]+)';
        }
        return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      })
      .join('/');
    this.routes.push({ method, pattern: new RegExp(`^${source}$`), names, handler });
  }

  async listen(port: number, host: string): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error) =>
        reject(
          new CallgateError('CALLGATE_ERR_LISTEN_FAILED', {
            address: `${host}:${port} (http)`,
            reason: error.message,
          }),
        );
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  get listening(): boolean {
    return this.server.listening;
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }

  /** Runs every readiness check; exported for the entry points' startup log. */
  async readiness(): Promise<{ ready: boolean; failing: Record<string, string> }> {
    const failing: Record<string, string> = {};
    await Promise.all(
      this.checks.map(async (check) => {
        try {
          const reason = await check.check();
          if (reason !== undefined) failing[check.name] = reason;
        } catch (error) {
          failing[check.name] = error instanceof Error ? error.message : String(error);
        }
      }),
    );
    return { ready: Object.keys(failing).length === 0, failing };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://local');
    const method = req.method ?? 'GET';
    if (method === 'GET' && url.pathname === '/healthz') {
      sendJson(res, 200, { status: 'ok' });
      return;
    }
    if (method === 'GET' && url.pathname === '/readyz') {
      const { ready, failing } = await this.readiness();
      sendJson(
        res,
        ready ? 200 : 503,
        ready ? { status: 'ready' } : { status: 'not ready', failing },
      );
      return;
    }
    if (method === 'GET' && url.pathname === '/metrics') {
      await Promise.all(this.refreshers.map((refresh) => refresh().catch(() => undefined)));
      // OpenMetrics (with exemplars: a slow bucket leads to the call behind it) for a scraper that
      // asks for it; the Prometheus text format otherwise.
      const open = wantsOpenMetrics(req.headers.accept);
      const text = open ? await openMetricsText() : await registry.metrics();
      res.writeHead(200, {
        'content-type': open ? OPENMETRICS_CONTENT_TYPE : registry.contentType,
      });
      res.end(text);
      return;
    }
    for (const route of this.routes) {
      if (route.method !== method) continue;
      const match = route.pattern.exec(url.pathname);
      if (!match) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        params[name] = decodeURIComponent(match[i + 1] ?? '');
      });
      let body: unknown;
      try {
        body = await readJsonBody(req);
      } catch (error) {
        sendError(res, error);
        return;
      }
      try {
        const response = await route.handler({
          method,
          path: url.pathname,
          params,
          query: url.searchParams,
          body,
        });
        if (response.contentType !== undefined) {
          res.writeHead(response.status ?? 200, { 'content-type': response.contentType });
          res.end(String(response.body));
        } else {
          sendJson(res, response.status ?? 200, response.body);
        }
      } catch (error) {
        sendError(res, error);
      }
      return;
    }
    sendError(
      res,
      new CallgateError('CALLGATE_ERR_HTTP_NOT_FOUND', { method, path: url.pathname }),
    );
  }
}

function sendError(res: ServerResponse, error: unknown): void {
  if (isCallgateError(error)) {
    sendJson(res, error.httpStatus ?? 500, { error: { code: error.code, message: error.message } });
    return;
  }
  rootLogger().error('http route failed', { error });
  sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  if (req.method === 'GET' || req.method === 'HEAD') return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', {
        reason: `body above ${MAX_BODY_BYTES} bytes`,
      });
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', { reason: 'body is not JSON' });
  }
}
