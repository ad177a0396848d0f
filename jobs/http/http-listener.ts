/**
 * What both HTTP listeners share: fastify with bounded bodies, headers and request times, one
 * error shape from the error table (`{ error: { code, message } }`), 404 from the table for an
 * unknown route or method, 400 for a malformed URL, and listen/close.
 * Hostile input is pinned by test/integration/http/hostile-input.test.ts.
 */
import type { AddressInfo } from 'node:net';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { CallgateError, isCallgateError } from '../../config/errors.ts';
import { rootLogger } from '../../config/log.ts';

/** Request bodies above this are refused: the operator API takes small JSON documents only. */
export const MAX_BODY_BYTES = 1_048_576;
/** Request line and headers together; Node answers 431 above it. Node's own default. */
export const MAX_HEADER_BYTES = 16_384;
/** A client must have sent its headers within this. */
export const HTTP_HEADERS_TIMEOUT_MS = 10_000;
/** A client must have sent its whole request within this; stays above the longest auth delay. */
export const HTTP_REQUEST_TIMEOUT_MS = 30_000;
/** A socket with nothing moving on it is closed after this. */
export const HTTP_CONNECTION_TIMEOUT_MS = 60_000;
/** An idle keep-alive connection is closed after this. */
export const HTTP_KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** How often Node checks the header and request timeouts; bounds how late a slow client is cut. */
export const HTTP_TIMEOUT_CHECK_INTERVAL_MS = 1_000;

/** Bounds a listener applies; tests shorten them. */
export interface HttpBounds {
  readonly bodyLimit: number;
  readonly maxHeaderSize: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly connectionTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly timeoutCheckIntervalMs: number;
}

export const DEFAULT_HTTP_BOUNDS: HttpBounds = {
  bodyLimit: MAX_BODY_BYTES,
  maxHeaderSize: MAX_HEADER_BYTES,
  headersTimeoutMs: HTTP_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: HTTP_REQUEST_TIMEOUT_MS,
  connectionTimeoutMs: HTTP_CONNECTION_TIMEOUT_MS,
  keepAliveTimeoutMs: HTTP_KEEP_ALIVE_TIMEOUT_MS,
  timeoutCheckIntervalMs: HTTP_TIMEOUT_CHECK_INTERVAL_MS,
};

export interface RouteResponse {
  readonly status?: number;
  /** Serialised as JSON unless `contentType` says otherwise (then it must be a string). */
  readonly body: unknown;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A fastify instance with callgate's bounds and error answers. */
export function createHttpApp(bounds: Partial<HttpBounds> = {}): FastifyInstance {
  const b = { ...DEFAULT_HTTP_BOUNDS, ...bounds };
  const app = Fastify({
    logger: false,
    bodyLimit: b.bodyLimit,
    requestTimeout: b.requestTimeoutMs,
    connectionTimeout: b.connectionTimeoutMs,
    keepAliveTimeout: b.keepAliveTimeoutMs,
    http: {
      maxHeaderSize: b.maxHeaderSize,
      headersTimeout: b.headersTimeoutMs,
      connectionsCheckingInterval: b.timeoutCheckIntervalMs,
    },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    frameworkErrors: (error, request, reply) => {
      // A malformed percent-escape in the path: the client's mistake, never a 500.
      void sendError(
        reply,
        new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', { reason: error.message }),
        request,
      );
    },
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new CallgateError('CALLGATE_ERR_HTTP_NOT_FOUND', {
        method: request.method,
        path: pathOf(request),
      }),
      request,
    ),
  );
  app.setErrorHandler((error: FastifyError, request, reply) => sendError(reply, error, request));
  return app;
}

/** The request's path without its query; as sent (not decoded), for logs and messages. */
export function pathOf(request: FastifyRequest): string {
  const url = request.raw.url ?? '/';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

export async function sendRouteResponse(
  reply: FastifyReply,
  response: RouteResponse,
): Promise<FastifyReply> {
  void reply.code(response.status ?? 200);
  if (response.headers !== undefined) void reply.headers(response.headers);
  if (response.contentType !== undefined)
    return reply.type(response.contentType).send(String(response.body));
  return reply.type('application/json; charset=utf-8').send(JSON.stringify(response.body));
}

/** Answers with the error's row of the table; fastify's own client errors are bad requests. */
export async function sendError(
  reply: FastifyReply,
  error: unknown,
  request: FastifyRequest,
): Promise<FastifyReply> {
  const known = asCallgateError(error);
  if (known === undefined) {
    rootLogger().error('http route failed', { error, path: pathOf(request) });
    return sendRouteResponse(reply, {
      status: 500,
      body: { error: { code: 'internal', message: 'internal error' } },
    });
  }
  return sendRouteResponse(reply, {
    status: known.httpStatus ?? 500,
    body: { error: { code: known.code, message: known.message } },
  });
}

function asCallgateError(error: unknown): CallgateError | undefined {
  if (isCallgateError(error)) return error;
  const status = (error as Partial<FastifyError> | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500)
    return new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', {
      reason: error instanceof Error ? error.message : String(error),
    });
  return undefined;
}

/** Listens, or throws CALLGATE_ERR_LISTEN_FAILED naming the address. */
export async function listenHttp(
  app: FastifyInstance,
  port: number,
  host: string,
  what: string,
): Promise<AddressInfo> {
  try {
    await app.listen({ port, host });
  } catch (error) {
    throw new CallgateError('CALLGATE_ERR_LISTEN_FAILED', {
      address: `${host}:${port} (${what})`,
      reason: error instanceof Error ? error.message : String(error),
    });
  }
  return app.server.address() as AddressInfo;
}
