/**
 * The operator listener's authentication, on a real server: 401 without or with a wrong token
 * (with WWW-Authenticate: Bearer), 403 for a token without the route's scope, the handler only
 * with the right one; writes logged with the token's name; an address that keeps failing gets its
 * 401s late; an open API (no tokens) serves without one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogFields } from '../../../config/log.ts';
import { AuthFailureThrottle } from '../../../jobs/http/auth-failure-throttle.ts';
import type { OperatorServer } from '../../../jobs/http/operator-server.ts';
import {
  bearer,
  startTestOperatorServer,
  type TestOperatorServer,
} from '../../support/operator-api.ts';

const READER = 'reader-token-0123456789abcdef';
const WRITER = 'writer-token-0123456789abcdef';
const FAILURE_LIMIT = 3;
const FAILURE_DELAY_MS = 400;

interface LogLine {
  readonly level: 'info' | 'warn';
  readonly msg: string;
  readonly fields: LogFields;
}

const lines: LogLine[] = [];
const log = {
  info: (msg: string, fields: LogFields = {}) => lines.push({ level: 'info', msg, fields }),
  warn: (msg: string, fields: LogFields = {}) => lines.push({ level: 'warn', msg, fields }),
};
let handled = 0;

function routes(server: OperatorServer): void {
  server.route({
    method: 'GET',
    path: '/v1/operations',
    scope: 'operations:read',
    handler: async () => {
      handled++;
      return { body: { operations: [] } };
    },
  });
  server.route({
    method: 'POST',
    path: '/v1/operations/op_1/reconcile',
    scope: 'operations:write',
    handler: async () => {
      handled++;
      return { status: 202, body: { reconcile: 'requested' } };
    },
  });
}

let api: TestOperatorServer;
let open: TestOperatorServer;

beforeAll(async () => {
  api = await startTestOperatorServer(routes, {
    tokens: [
      { name: 'dashboard', secret: READER, scopes: ['operations:read'] },
      { name: 'oncall', secret: WRITER, scopes: ['operations:read', 'operations:write'] },
    ],
    log,
  });
  open = await startTestOperatorServer(routes, { tokens: 'open', log });
});
afterAll(async () => {
  await api.close();
  await open.close();
});

async function call(
  path: string,
  headers: Record<string, string>,
  method = 'GET',
): Promise<{ status: number; code?: string; challenge: string | null }> {
  const response = await fetch(`${api.base}${path}`, { method, headers });
  const body = (await response.json()) as { error?: { code: string } };
  return {
    status: response.status,
    ...(body.error !== undefined && { code: body.error.code }),
    challenge: response.headers.get('www-authenticate'),
  };
}

describe('when a request comes without a valid token', () => {
  it('should answer 401 with a Bearer challenge, and not run the handler', async () => {
    const before = handled;
    expect(await call('/v1/operations', {})).toEqual({
      status: 401,
      code: 'CALLGATE_ERR_HTTP_UNAUTHORIZED',
      challenge: 'Bearer realm="callgate"',
    });
    expect(await call('/v1/operations', bearer('not-a-token-of-ours-0123'))).toEqual({
      status: 401,
      code: 'CALLGATE_ERR_HTTP_UNAUTHORIZED',
      challenge: 'Bearer realm="callgate", error="invalid_token"',
    });
    expect(await call('/v1/operations', { authorization: `Basic ${READER}` })).toMatchObject({
      status: 401,
    });
    // A token that differs only in length or case is still wrong.
    expect(await call('/v1/operations', bearer(`${READER}x`))).toMatchObject({ status: 401 });
    expect(await call('/v1/operations', bearer(READER.toUpperCase()))).toMatchObject({
      status: 401,
    });
    // An unknown path says nothing of the routes to a caller without a token.
    expect(await call('/v1/nothing', {})).toMatchObject({ status: 401 });
    expect(handled).toBe(before);
  });
});

describe('when a token lacks the route scope', () => {
  it('should answer 403 naming the scope, and not run the handler', async () => {
    const before = handled;
    expect(await call('/v1/operations/op_1/reconcile', bearer(READER), 'POST')).toEqual({
      status: 403,
      code: 'CALLGATE_ERR_HTTP_FORBIDDEN',
      challenge: 'Bearer realm="callgate", error="insufficient_scope", scope="operations:write"',
    });
    expect(handled).toBe(before);
  });
});

describe('when a token has the route scope', () => {
  it('should run the handler, and log the write with the token name', async () => {
    expect(await call('/v1/operations', bearer(READER))).toMatchObject({ status: 200 });
    lines.length = 0;
    expect(await call('/v1/operations/op_1/reconcile', bearer(WRITER), 'POST')).toMatchObject({
      status: 202,
    });
    expect(lines).toContainEqual({
      level: 'info',
      msg: 'operator api write',
      fields: expect.objectContaining({
        actor: 'oncall',
        method: 'POST',
        path: '/v1/operations/op_1/reconcile',
        status: 202,
      }) as LogFields,
    });
    // Reads are not logged one by one.
    await call('/v1/operations', bearer(WRITER));
    expect(lines.filter((line) => line.msg === 'operator api write')).toHaveLength(1);
  });

  it('should log a refused write too, without a token name', async () => {
    lines.length = 0;
    await call('/v1/operations/op_1/reconcile', bearer(READER), 'POST');
    expect(lines.find((line) => line.msg === 'operator api write')?.fields).toMatchObject({
      actor: 'dashboard',
      status: 403,
    });
  });
});

describe('when one address keeps failing', () => {
  it('should answer its 401s late past the limit, while a right token is still served at once', async () => {
    const guarded = await startTestOperatorServer(routes, {
      tokens: [{ name: 'dashboard', secret: READER, scopes: ['operations:read'] }],
      log,
      throttle: new AuthFailureThrottle({
        limit: FAILURE_LIMIT,
        delayMs: FAILURE_DELAY_MS,
        maxDelayMs: FAILURE_DELAY_MS,
      }),
    });
    try {
      lines.length = 0;
      const timed = async (headers: Record<string, string>) => {
        const started = Date.now();
        const response = await fetch(`${guarded.base}/v1/operations`, { headers });
        return { status: response.status, ms: Date.now() - started };
      };
      const wrong = bearer('guess-0000000000000000');
      const answers = [];
      for (let i = 0; i < FAILURE_LIMIT + 2; i++) answers.push(await timed(wrong));
      expect(answers.every((answer) => answer.status === 401)).toBe(true);
      expect(answers.slice(0, FAILURE_LIMIT).every((a) => a.ms < FAILURE_DELAY_MS)).toBe(true);
      expect(answers.slice(FAILURE_LIMIT).every((a) => a.ms >= FAILURE_DELAY_MS - 20)).toBe(true);
      const right = await timed(bearer(READER));
      expect(right.status).toBe(200);
      expect(right.ms).toBeLessThan(FAILURE_DELAY_MS);
      // Said once, when the address crosses the limit.
      expect(lines.filter((line) => line.level === 'warn')).toEqual([
        {
          level: 'warn',
          msg: expect.stringContaining('repeated authentication failures') as string,
          fields: expect.objectContaining({ source: '127.0.0.1' }) as LogFields,
        },
      ]);
    } finally {
      await guarded.close();
    }
  });
});

describe('when the API runs open (loopback, no tokens)', () => {
  it('should serve without a token and log writes as open', async () => {
    lines.length = 0;
    expect((await fetch(`${open.base}/v1/operations`)).status).toBe(200);
    const write = await fetch(`${open.base}/v1/operations/op_1/reconcile`, { method: 'POST' });
    expect(write.status).toBe(202);
    expect(lines.find((line) => line.msg === 'operator api write')?.fields).toMatchObject({
      actor: 'none (open)',
    });
  });
});
