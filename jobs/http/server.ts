/**
 * The probe listener (`http.listen`, `http.port`): GET /healthz (liveness), GET /readyz (every
 * readiness check passes, else 503 with the failing ones) and GET /metrics (the one registry, as
 * OpenMetrics for a scraper that asks for it). Nothing else: no caller data is served here
 * (test/integration/foundation/startup.test.ts, test/integration/http/hostile-input.test.ts). The operator API has its own listener
 * (operator-server.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import {
  OPENMETRICS_CONTENT_TYPE,
  openMetricsText,
  registry,
  wantsOpenMetrics,
} from '../../config/metrics.ts';
import { createHttpApp, listenHttp, sendRouteResponse, type HttpBounds } from './http-listener.ts';

/** Probes take no bodies. */
const PROBE_BODY_LIMIT = 1_024;

export interface ReadinessCheck {
  readonly name: string;
  /** Resolves to undefined when ready, or a reason when not. */
  check(): Promise<string | undefined>;
}

export interface Readiness {
  readonly ready: boolean;
  readonly failing: Record<string, string>;
}

export class HttpServer {
  private readonly app: FastifyInstance;
  private readonly checks: ReadinessCheck[] = [];
  private readonly refreshers: (() => Promise<void>)[] = [];

  constructor(bounds: Partial<HttpBounds> = {}) {
    this.app = createHttpApp({ bodyLimit: PROBE_BODY_LIMIT, ...bounds });
    this.app.get('/healthz', (_request, reply) =>
      sendRouteResponse(reply, { body: { status: 'ok' } }),
    );
    this.app.get('/readyz', async (_request, reply) => {
      const { ready, failing } = await this.readiness();
      return sendRouteResponse(reply, {
        status: ready ? 200 : 503,
        body: ready ? { status: 'ready' } : { status: 'not ready', failing },
      });
    });
    this.app.get('/metrics', async (request, reply) => {
      await Promise.all(this.refreshers.map((refresh) => refresh().catch(() => undefined)));
      // OpenMetrics (with exemplars: a slow bucket leads to the call behind it) for a scraper that
      // asks for it; the Prometheus text format otherwise.
      const open = wantsOpenMetrics(request.headers.accept);
      return sendRouteResponse(reply, {
        contentType: open ? OPENMETRICS_CONTENT_TYPE : registry.contentType,
        body: open ? await openMetricsText() : await registry.metrics(),
      });
    });
  }

  addReadinessCheck(check: ReadinessCheck): void {
    this.checks.push(check);
  }

  /** Runs before each scrape, for gauges read from elsewhere (queue depths). */
  addMetricsRefresher(refresh: () => Promise<void>): void {
    this.refreshers.push(refresh);
  }

  async listen(port: number, host: string): Promise<AddressInfo> {
    return listenHttp(this.app, port, host, 'http');
  }

  get listening(): boolean {
    return this.app.server.listening;
  }

  async close(): Promise<void> {
    await this.app.close();
  }

  /** Runs every readiness check; exported for the entry points' startup log. */
  async readiness(): Promise<Readiness> {
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
}
