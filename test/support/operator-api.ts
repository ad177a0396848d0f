/** The operator API for tests: a token with every scope, its header, and an in-process server. */
import { operatorScopes, type OperatorScope } from '../../config/schema.ts';
import type { AuthFailureThrottle } from '../../jobs/http/auth-failure-throttle.ts';
import type { HttpBounds } from '../../jobs/http/http-listener.ts';
import { OperatorServer } from '../../jobs/http/operator-server.ts';
import { OperatorTokens } from '../../jobs/http/operator-tokens.ts';
import { Logger } from '../../config/log.ts';

const quietLog = new Logger({ level: 'error', sink: { write: () => undefined } });

/** A token with every scope, as the test processes' configuration names it. */
export const TEST_OPERATOR_TOKEN = 'test-operator-token-0123456789abcdef';
/** The environment variable the test processes read it from. */
export const TEST_OPERATOR_TOKEN_ENV = 'CALLGATE_TOKEN_TEST';

/** The configuration entry for the test token (`http.operator.tokens[]`). */
export const TEST_OPERATOR_TOKEN_CONFIG = {
  name: 'test',
  tokenEnv: TEST_OPERATOR_TOKEN_ENV,
  scopes: [...operatorScopes],
};

export function bearer(token: string = TEST_OPERATOR_TOKEN): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export interface TestToken {
  readonly name: string;
  readonly secret: string;
  readonly scopes: readonly OperatorScope[];
}

export interface TestOperatorServer {
  readonly server: OperatorServer;
  readonly base: string;
  /** Fetches a path of the API with the test token (or the given headers). */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

export interface TestOperatorServerOptions {
  readonly tokens?: readonly TestToken[] | 'open';
  readonly log?: OperatorServerLog;
  readonly throttle?: AuthFailureThrottle;
  readonly bounds?: Partial<HttpBounds>;
}

type OperatorServerLog = ConstructorParameters<typeof OperatorServer>[0]['log'];

/** An operator server on a free loopback port, with the routes `register` adds. */
export async function startTestOperatorServer(
  register: (server: OperatorServer) => void,
  options: TestOperatorServerOptions = {},
): Promise<TestOperatorServer> {
  const tokens = options.tokens ?? [
    { name: 'test', secret: TEST_OPERATOR_TOKEN, scopes: operatorScopes },
  ];
  const server = new OperatorServer({
    tokens: tokens === 'open' ? 'open' : new OperatorTokens(tokens),
    log: options.log ?? quietLog,
    ...(options.throttle !== undefined && { throttle: options.throttle }),
    ...(options.bounds !== undefined && { bounds: options.bounds }),
  });
  register(server);
  const address = await server.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${address.port}`;
  return {
    server,
    base,
    fetch: (path, init = {}) =>
      fetch(`${base}${path}`, { ...init, headers: { ...bearer(), ...init.headers } }),
    close: () => server.close(),
  };
}
