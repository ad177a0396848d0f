/**
 * The operator listener (`http.operator.listen`, `http.operator.port`): the JSON and HTML routes
 * modules register (operations, calls, timelines, reconcile, re-drive, reload). Every request
 * proves a bearer token first (onRequest), then each route checks the scope it needs; params,
 * query and body are checked with the route's zod schemas before its handler runs. Every write is
 * logged with the token's name. Without tokens (allowed on loopback only) the API is open.
 * Pinned by test/integration/http/operator-auth.test.ts.
 */
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CallgateError } from '../../config/errors.ts';
import type { Logger } from '../../config/log.ts';
import type { OperatorScope } from '../../config/schema.ts';
import { AuthFailureThrottle } from './auth-failure-throttle.ts';
import {
  createHttpApp,
  listenHttp,
  pathOf,
  sendError,
  sendRouteResponse,
  type HttpBounds,
  type RouteResponse,
} from './http-listener.ts';
import type { OperatorToken, OperatorTokens } from './operator-tokens.ts';

export type { RouteResponse } from './http-listener.ts';

export interface OperatorRequest<P, Q, B> {
  readonly params: P;
  readonly query: Q;
  readonly body: B;
  /** The name of the token the request came with; undefined on an open API. */
  readonly token: string | undefined;
}

export interface OperatorRoute<P, Q, B> {
  readonly method: 'GET' | 'POST';
  /** `:name` segments become params. */
  readonly path: string;
  readonly scope: OperatorScope;
  readonly params?: z.ZodType<P>;
  readonly query?: z.ZodType<Q>;
  readonly body?: z.ZodType<B>;
  readonly handler: (request: OperatorRequest<P, Q, B>) => Promise<RouteResponse>;
}

export interface OperatorServerOptions {
  /** `open`: no token needed (a loopback listener without configured tokens). */
  readonly tokens: OperatorTokens | 'open';
  readonly log: Pick<Logger, 'info' | 'warn'>;
  readonly throttle?: AuthFailureThrottle;
  readonly bounds?: Partial<HttpBounds>;
}

/** `:id` of a resource (operation, call): bounded, so a huge id is refused before any lookup. */
export const resourceIdParams = z.object({ id: z.string().min(1).max(256) });

const REALM = 'Bearer realm="callgate"';
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** What the authentication hook learnt of a request; private to this module. */
type Caller = { readonly kind: 'open' } | { readonly kind: 'token'; readonly token: OperatorToken };

export class OperatorServer {
  private readonly app: FastifyInstance;
  private readonly tokens: OperatorTokens | 'open';
  private readonly log: Pick<Logger, 'info' | 'warn'>;
  private readonly throttle: AuthFailureThrottle;
  private readonly callers = new WeakMap<FastifyRequest, Caller>();

  constructor(options: OperatorServerOptions) {
    this.tokens = options.tokens;
    this.log = options.log;
    this.throttle = options.throttle ?? new AuthFailureThrottle();
    this.app = createHttpApp(options.bounds);
    // Before routing matters: an unknown path without a token is a 401, so routes cannot be probed.
    this.app.addHook('onRequest', (request, reply) => this.authenticate(request, reply));
    this.app.addHook('onResponse', async (request, reply) => {
      this.logWrite(request, reply);
    });
  }

  /** True when no token is needed (see OperatorServerOptions.tokens). */
  get open(): boolean {
    return this.tokens === 'open';
  }

  route<P = undefined, Q = undefined, B = undefined>(route: OperatorRoute<P, Q, B>): void {
    this.app.route({
      method: route.method,
      url: route.path,
      onRequest: (request, reply) => this.authorize(request, reply, route.scope),
      preValidation: async (request) => {
        request.params = parsePart('params', route.params, request.params);
        request.query = parsePart('query', route.query, request.query);
        request.body = parsePart('body', route.body, request.body);
      },
      handler: async (request, reply) => {
        const response = await route.handler({
          // Replaced by the schemas' output in preValidation above.
          params: request.params as P,
          query: request.query as Q,
          body: request.body as B,
          token: this.tokenName(request),
        });
        return sendRouteResponse(reply, response);
      },
    });
  }

  async listen(port: number, host: string): Promise<AddressInfo> {
    return listenHttp(this.app, port, host, 'http.operator');
  }

  get listening(): boolean {
    return this.app.server.listening;
  }

  async close(): Promise<void> {
    await this.app.close();
  }

  private async authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (this.tokens === 'open') {
      this.callers.set(request, { kind: 'open' });
      return;
    }
    const outcome = this.tokens.authenticate(request.headers.authorization);
    if (outcome.kind === 'token') {
      this.callers.set(request, { kind: 'token', token: outcome.token });
      return;
    }
    const { delayMs, crossedLimit } = this.throttle.recordFailure(request.ip);
    if (crossedLimit)
      this.log.warn('operator api: repeated authentication failures, answers delayed', {
        source: request.ip,
        delay_ms: delayMs,
      });
    if (delayMs > 0) await sleep(delayMs);
    const presented = request.headers.authorization !== undefined;
    void reply.header('www-authenticate', presented ? `${REALM}, error="invalid_token"` : REALM);
    await sendError(
      reply,
      new CallgateError('CALLGATE_ERR_HTTP_UNAUTHORIZED', { reason: outcome.reason }),
      request,
    );
  }

  private async authorize(
    request: FastifyRequest,
    reply: FastifyReply,
    scope: OperatorScope,
  ): Promise<void> {
    const caller = this.callers.get(request);
    if (caller === undefined || caller.kind === 'open' || caller.token.scopes.has(scope)) return;
    void reply.header('www-authenticate', `${REALM}, error="insufficient_scope", scope="${scope}"`);
    await sendError(
      reply,
      new CallgateError('CALLGATE_ERR_HTTP_FORBIDDEN', {
        token: caller.token.name,
        scope,
        method: request.method,
        path: pathOf(request),
      }),
      request,
    );
  }

  private tokenName(request: FastifyRequest): string | undefined {
    const caller = this.callers.get(request);
    return caller?.kind === 'token' ? caller.token.name : undefined;
  }

  private logWrite(request: FastifyRequest, reply: FastifyReply): void {
    if (READ_METHODS.has(request.method)) return;
    const caller = this.callers.get(request);
    this.log.info('operator api write', {
      // The token's name; a field named "token" would be scrubbed by the logger as a secret.
      actor: caller === undefined ? 'none (refused)' : (this.tokenName(request) ?? 'none (open)'),
      method: request.method,
      path: pathOf(request),
      status: reply.statusCode,
      source: request.ip,
    });
  }
}

/** Parses one part of a request with its schema; a part without a schema is dropped. */
function parsePart<T>(
  part: 'params' | 'query' | 'body',
  schema: z.ZodType<T> | undefined,
  value: unknown,
): T | undefined {
  if (schema === undefined) return undefined;
  const result = schema.safeParse(value ?? (part === 'body' ? undefined : {}));
  if (result.success) return result.data;
  const reason = result.error.issues
    .map((issue) => `${[part, ...issue.path.map(String)].join('.')}: ${issue.message}`)
    .join('; ');
  throw new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', { reason });
}
