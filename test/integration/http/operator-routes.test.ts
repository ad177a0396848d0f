/**
 * Every operator route of a running callgate (gateway/main.ts with workers: operations, calls,
 * timelines, the call page, reconcile, re-drive, reload) answers 401 without a token or with a
 * wrong one, 403 with a token lacking its scope, and serves the right one; the probe listener
 * serves /healthz, /readyz and /metrics without a token and none of the operator routes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorScope } from '../../../config/schema.ts';
import { startCallgate, type CallgateProcess } from '../../e2e/callgate-process.ts';
import { bearer, TEST_OPERATOR_TOKEN_CONFIG } from '../../support/operator-api.ts';
import { waitFor } from '../../support/processes.ts';

const CALLS_ONLY = 'calls-only-token-0123456789abcdef';
const OPERATIONS_ONLY = 'operations-only-token-0123456789ab';

interface RouteCase {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly scope: OperatorScope;
  /** What the right token gets (nothing exists under these ids). */
  readonly status: number;
}

const ROUTES: readonly RouteCase[] = [
  { method: 'GET', path: '/v1/operations/op_nope', scope: 'operations:read', status: 404 },
  { method: 'GET', path: '/v1/operations?state=UNKNOWN', scope: 'operations:read', status: 200 },
  {
    method: 'POST',
    path: '/v1/operations/op_nope/reconcile',
    scope: 'operations:write',
    status: 404,
  },
  {
    method: 'POST',
    path: '/v1/operations/op_nope/notify/redrive',
    scope: 'operations:write',
    status: 404,
  },
  { method: 'GET', path: '/v1/calls', scope: 'calls:read', status: 200 },
  { method: 'GET', path: '/v1/calls/nope/timeline', scope: 'calls:read', status: 404 },
  { method: 'GET', path: '/calls/nope', scope: 'calls:read', status: 404 },
  { method: 'POST', path: '/v1/admin/reload', scope: 'admin', status: 200 },
];

/** A token without the scope: calls:read only for the operations routes, operations:read only else. */
function lacking(scope: OperatorScope): string {
  return scope.startsWith('operations') ? CALLS_ONLY : OPERATIONS_ONLY;
}

let cg: CallgateProcess;

beforeAll(async () => {
  cg = await startCallgate({
    script: { name: 'operator-routes', greeting: 'Hello.', fallback: 'Sorry?' },
    agent: 'reservations',
    overrides: (config) => {
      config.http = {
        ...(config.http as Record<string, unknown>),
        operator: {
          tokens: [
            TEST_OPERATOR_TOKEN_CONFIG,
            { name: 'calls-only', tokenEnv: 'CALLGATE_TOKEN_CALLS_ONLY', scopes: ['calls:read'] },
            {
              name: 'operations-only',
              tokenEnv: 'CALLGATE_TOKEN_OPERATIONS_ONLY',
              scopes: ['operations:read'],
            },
          ],
        },
      };
    },
    env: {
      CALLGATE_TOKEN_CALLS_ONLY: CALLS_ONLY,
      CALLGATE_TOKEN_OPERATIONS_ONLY: OPERATIONS_ONLY,
    },
  });
}, 60_000);
afterAll(async () => {
  await cg?.stop();
});

async function statusOf(
  base: string,
  route: RouteCase,
  headers: Record<string, string> = {},
): Promise<number> {
  const response = await fetch(`${base}${route.path}`, { method: route.method, headers });
  await response.arrayBuffer();
  return response.status;
}

describe('when an operator route is called on a running callgate', () => {
  it.each(ROUTES)(
    '$method $path should need $scope',
    async (route) => {
      expect(await statusOf(cg.operatorUrl, route)).toBe(401);
      expect(await statusOf(cg.operatorUrl, route, bearer('wrong-token-0123456789abcdef'))).toBe(
        401,
      );
      expect(await statusOf(cg.operatorUrl, route, bearer(lacking(route.scope)))).toBe(403);
      expect(await statusOf(cg.operatorUrl, route, bearer())).toBe(route.status);
      // A reload compiles the agents again: slow on a loaded machine.
    },
    60_000,
  );

  it('should log each write with the name of its token', async () => {
    const writes = () =>
      cg.proc
        .stdout()
        .split('\n')
        .filter((line) => line.includes('operator api write'))
        .map((line) => JSON.parse(line) as { actor: string; path: string; status: number });
    // Logged once the answer is sent: the line can reach the output after the client has it.
    await waitFor(
      async () =>
        writes().some((w) => w.actor === 'test' && w.path === '/v1/admin/reload') || undefined,
      5_000,
      'the reload write line',
    );
    expect(writes()).toContainEqual(
      expect.objectContaining({ actor: 'test', path: '/v1/admin/reload', status: 200 }),
    );
    expect(writes()).toContainEqual(
      expect.objectContaining({
        actor: 'calls-only',
        path: '/v1/operations/op_nope/reconcile',
        status: 403,
      }),
    );
    // The secrets themselves never reach the log.
    expect(cg.proc.output()).not.toContain(CALLS_ONLY);
  });
});

describe('when the probe listener is called', () => {
  it('should serve /healthz, /readyz and /metrics without a token', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect((await fetch(`${cg.httpUrl}${path}`)).status, path).toBe(200);
  });

  it.each(ROUTES)('should not serve $method $path, even with a token', async (route) => {
    expect(await statusOf(cg.httpUrl, route, bearer())).toBe(404);
  });
});
