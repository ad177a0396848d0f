/**
 * One HTTP exchange with a system of record, classified by how far it got. This is where the
 * UNKNOWN state is born, so the line is drawn precisely:
 *
 *   failed before a connection existed (refused, DNS, connect timeout, aborted)
 *       -> ProviderUnreachableError: the request cannot have reached the provider
 *   failed after the connection was up (timeout, reset, aborted, cut-off answer)
 *       -> ProviderOutcomeUnknownError: the provider may have acted on it
 *
 * A reused keep-alive connection counts as "up" from the start: a reset on it may have
 * followed a request the provider read, so it is reported as unknown, never as unreachable.
 */
import {
  Agent as HttpAgent,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type RequestOptions,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { CallgateError } from '../../config/errors.ts';
import { ProviderOutcomeUnknownError, ProviderUnreachableError } from './provider.ts';

/**
 * Idle keep-alive sockets are closed after this. It stays below Node's default server
 * keepAliveTimeout (5 s) so we do not pick a socket the server is closing at that moment,
 * which would turn into a spurious UNKNOWN.
 */
const FREE_SOCKET_IDLE_MS = 1_000;
/** Answers larger than this are cut off and treated as unreadable. */
export const MAX_RESPONSE_BYTES = 1_048_576;

export interface ProviderHttpClientOptions {
  /** The provider's name in errors and metrics. */
  readonly provider: string;
  /** Paths are appended to it (a trailing slash is optional). */
  readonly baseUrl: string;
  /** The whole exchange, connect to last byte, must finish within this. */
  readonly timeoutMs: number;
  /** Sent as `Authorization: Bearer <token>` when set. */
  readonly token?: string;
}

export interface ProviderHttpRequest {
  readonly method: 'GET' | 'POST';
  /** Relative to the base URL, already percent-encoded. */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
  readonly signal: AbortSignal;
}

export interface ProviderHttpResponse {
  readonly status: number;
  readonly text: string;
}

export class ProviderHttpClient {
  private readonly options: ProviderHttpClientOptions;
  private readonly agent: HttpAgent;
  private readonly secure: boolean;
  /** Where every request goes, parsed once: requests only add their path to `basePath`. */
  private readonly target: Pick<RequestOptions, 'protocol' | 'hostname' | 'port' | 'auth'>;
  /** The base URL's path, ending with a slash. */
  private readonly basePath: string;

  constructor(options: ProviderHttpClientOptions) {
    this.options = options;
    const base = new URL(options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
    this.secure = base.protocol === 'https:';
    const agentOptions = { keepAlive: true, timeout: FREE_SOCKET_IDLE_MS };
    this.agent = this.secure ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
    this.target = {
      protocol: base.protocol,
      // The brackets of an IPv6 literal belong to the URL, not to the address.
      hostname: base.hostname.startsWith('[') ? base.hostname.slice(1, -1) : base.hostname,
      port: base.port === '' ? undefined : Number(base.port),
      auth:
        base.username === ''
          ? undefined
          : `${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}`,
    };
    this.basePath = base.pathname;
  }

  send(request: ProviderHttpRequest): Promise<ProviderHttpResponse> {
    const { provider, timeoutMs } = this.options;
    const path =
      this.basePath + (request.path.startsWith('/') ? request.path.slice(1) : request.path);
    const payload = request.body === undefined ? undefined : JSON.stringify(request.body);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (request.headers !== undefined) Object.assign(headers, request.headers);
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (this.options.token !== undefined) headers.authorization = `Bearer ${this.options.token}`;

    return new Promise<ProviderHttpResponse>((resolve, reject) => {
      if (request.signal.aborted) {
        reject(
          new ProviderUnreachableError('aborted before sending', { cause: request.signal.reason }),
        );
        return;
      }
      /** True once a connection carried (or may have carried) the request. */
      let maybeSent = false;
      let settled = false;
      const { protocol, hostname, port, auth } = this.target;
      const options: RequestOptions = {
        protocol,
        hostname,
        port,
        auth,
        path,
        method: request.method,
        headers,
        agent: this.agent,
      };
      const req: ClientRequest = this.secure ? httpsRequest(options) : httpRequest(options);

      const settle = (outcome: { value: ProviderHttpResponse } | { error: Error }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        request.signal.removeEventListener('abort', onAbort);
        if ('value' in outcome) resolve(outcome.value);
        else {
          reject(outcome.error);
          req.destroy();
        }
      };
      const failure = (
        reason: string,
        code: 'CALLGATE_ERR_PROVIDER_TIMEOUT' | 'CALLGATE_ERR_PROVIDER_CONNECTION',
        cause?: unknown,
      ) => {
        const detail = new CallgateError(code, { provider, timeoutMs, reason }, { cause });
        return maybeSent
          ? new ProviderOutcomeUnknownError(`${reason} after the request was sent`, {
              cause: detail,
            })
          : new ProviderUnreachableError(reason, { cause: detail });
      };
      const onAbort = () =>
        settle({
          error: failure('aborted', 'CALLGATE_ERR_PROVIDER_CONNECTION', request.signal.reason),
        });
      const timer = setTimeout(
        () =>
          settle({
            error: failure(`no answer within ${timeoutMs} ms`, 'CALLGATE_ERR_PROVIDER_TIMEOUT'),
          }),
        timeoutMs,
      );
      request.signal.addEventListener('abort', onAbort, { once: true });

      req.on('socket', (socket: Socket) => {
        if (!socket.connecting) {
          maybeSent = true;
          return;
        }
        socket.once(this.secure ? 'secureConnect' : 'connect', () => {
          maybeSent = true;
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        settle({
          error: failure(error.code ?? error.message, 'CALLGATE_ERR_PROVIDER_CONNECTION', error),
        });
      });
      req.on('response', (res: IncomingMessage) => {
        maybeSent = true;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            settle({
              error: unreadable(provider, `the answer is larger than ${MAX_RESPONSE_BYTES} bytes`),
            });
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          settle({
            value: { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') },
          }),
        );
        res.on('error', (error) =>
          settle({
            error: failure(
              'connection reset mid-answer',
              'CALLGATE_ERR_PROVIDER_CONNECTION',
              error,
            ),
          }),
        );
        res.on('close', () => {
          if (!res.complete)
            settle({
              error: failure('connection closed mid-answer', 'CALLGATE_ERR_PROVIDER_CONNECTION'),
            });
        });
      });
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function unreadable(provider: string, reason: string): ProviderOutcomeUnknownError {
  return new ProviderOutcomeUnknownError(reason, {
    cause: new CallgateError('CALLGATE_ERR_PROVIDER_BAD_RESPONSE', { provider, reason }),
  });
}
