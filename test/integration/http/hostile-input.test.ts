/**
 * Hostile HTTP input gets a 4xx from the error table, never a 500, on both listeners: malformed
 * percent-escapes, bodies and headers above their bounds, bad query values, unknown routes and
 * methods; a client that sends its request slowly is cut off within its bound.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resourceIdParams } from '../../../jobs/http/operator-server.ts';
import { HttpServer } from '../../../jobs/http/server.ts';
import { startTestOperatorServer, type TestOperatorServer } from '../../support/operator-api.ts';

const SLOW_CLIENT_BOUND_MS = 500;
let api: TestOperatorServer;
let probes: HttpServer;
let probeBase: string;

beforeAll(async () => {
  api = await startTestOperatorServer(
    (server) => {
      server.route({
        method: 'GET',
        path: '/v1/things/:id',
        scope: 'operations:read',
        params: resourceIdParams,
        query: z.object({ color: z.string().optional() }),
        handler: async ({ params, query }) => ({ body: { id: params.id, color: query.color } }),
      });
      server.route({
        method: 'POST',
        path: '/v1/things/:id/paint',
        scope: 'operations:write',
        params: resourceIdParams,
        body: z.strictObject({ color: z.enum(['red', 'blue']) }),
        handler: async ({ params, body }) => ({ status: 202, body: { id: params.id, ...body } }),
      });
    },
    {
      bounds: {
        headersTimeoutMs: SLOW_CLIENT_BOUND_MS,
        requestTimeoutMs: SLOW_CLIENT_BOUND_MS * 2,
        timeoutCheckIntervalMs: 100,
      },
    },
  );
  probes = new HttpServer();
  probeBase = `http://127.0.0.1:${(await probes.listen(0, '127.0.0.1')).port}`;
});
afterAll(async () => {
  await api.close();
  await probes.close();
});

async function errorOf(response: Response): Promise<{ status: number; code: string }> {
  const body = (await response.json()) as { error: { code: string } };
  return { status: response.status, code: body.error.code };
}

/** Sends raw bytes and resolves with what came back and how long until the server closed. */
function rawExchange(
  base: string,
  send: (write: (text: string) => void) => void,
): Promise<{ reply: string; closedAfterMs: number }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let reply = '';
    const socket = connect(Number(port), hostname, () => send((text) => socket.write(text)));
    socket.on('data', (chunk) => (reply += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve({ reply, closedAfterMs: Date.now() - started }));
  });
}

describe('when a path carries a malformed percent-escape', () => {
  it('should answer 400 from the error table on the operator listener, not 500', async () => {
    for (const path of ['/v1/things/%E0%A4%A', '/v1/things/%zz', '/v1/things/%']) {
      expect(await errorOf(await api.fetch(path))).toEqual({
        status: 400,
        code: 'CALLGATE_ERR_HTTP_BAD_REQUEST',
      });
    }
  });

  it('should answer 4xx on the probe listener', async () => {
    const response = await fetch(`${probeBase}/healthz/%E0%A4%A`);
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
  });
});

describe('when a request is bigger than its bounds', () => {
  it('should refuse a body above 1 MiB with 400 and keep serving', async () => {
    const response = await api.fetch('/v1/things/a/paint', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ color: 'red', padding: 'x'.repeat(1_100_000) }),
    });
    expect(await errorOf(response)).toEqual({ status: 400, code: 'CALLGATE_ERR_HTTP_BAD_REQUEST' });
    expect((await api.fetch('/v1/things/a')).status).toBe(200);
  });

  it('should refuse headers above 16 KiB with 431 on both listeners', async () => {
    for (const base of [api.base, probeBase]) {
      const { reply } = await rawExchange(base, (write) =>
        write(`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`),
      );
      expect(reply).toMatch(/^HTTP\/1\.1 431 /);
    }
  });

  it('should refuse an id above 256 characters before any lookup', async () => {
    expect(await errorOf(await api.fetch(`/v1/things/${'a'.repeat(300)}`))).toEqual({
      status: 400,
      code: 'CALLGATE_ERR_HTTP_BAD_REQUEST',
    });
  });
});

describe('when params, query or body do not match the route', () => {
  it('should answer 400 naming the part, and run the handler only on valid input', async () => {
    const repeated = await api.fetch('/v1/things/a?color=red&color=blue');
    expect(repeated.status).toBe(400);
    expect(await repeated.text()).toContain('query.color');
    const bad = await api.fetch('/v1/things/a/paint', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ color: 'green' }),
    });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('body.color');
    const notJson = await api.fetch('/v1/things/a/paint', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"color":',
    });
    expect(await errorOf(notJson)).toEqual({ status: 400, code: 'CALLGATE_ERR_HTTP_BAD_REQUEST' });
    const good = await api.fetch('/v1/things/a/paint', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ color: 'blue' }),
    });
    expect(good.status).toBe(202);
    expect(await good.json()).toEqual({ id: 'a', color: 'blue' });
  });
});

describe('when no route matches', () => {
  it('should answer 404 from the error table for an unknown path and for a wrong method', async () => {
    expect(await errorOf(await api.fetch('/v1/nothing'))).toEqual({
      status: 404,
      code: 'CALLGATE_ERR_HTTP_NOT_FOUND',
    });
    expect(await errorOf(await api.fetch('/v1/things/a', { method: 'DELETE' }))).toEqual({
      status: 404,
      code: 'CALLGATE_ERR_HTTP_NOT_FOUND',
    });
    expect(await errorOf(await fetch(`${probeBase}/metrics`, { method: 'POST' }))).toEqual({
      status: 404,
      code: 'CALLGATE_ERR_HTTP_NOT_FOUND',
    });
  });
});

describe('when a client sends its request slowly', () => {
  it('should close the connection within the headers bound', async () => {
    const { closedAfterMs } = await rawExchange(api.base, (write) => {
      write('GET /v1/things/a HTTP/1.1\r\nhost: x\r\n');
      // Never finishes its headers.
    });
    expect(closedAfterMs).toBeLessThan(SLOW_CLIENT_BOUND_MS * 2 + 1_000);
  });
});
