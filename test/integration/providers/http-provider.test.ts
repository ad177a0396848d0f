import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HttpProvider } from '../../../jobs/providers/http-provider.ts';
import { ProviderOutcomeUnknownError } from '../../../jobs/providers/provider.ts';
import { providerRequest } from './sandbox-fixture.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** What the stub system of record does with the next request. */
type Behaviour = (res: ServerResponse) => void;

describe('the generic HTTP provider against a stub system of record', () => {
  let server: Server;
  let baseUrl: string;
  let seen: Seen[] = [];
  let behaviour: Behaviour = (res) => json(res, 200, { result: { ok: true } });
  let provider: HttpProvider;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
        });
        behaviour(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    provider = new HttpProvider({
      name: 'crm',
      baseUrl,
      honoursIdempotencyKeys: false,
      supportsCancel: true,
      timeoutMs: 300,
      token: 'tok-123456',
    });
  });
  beforeEach(() => {
    seen = [];
  });
  afterAll(async () => {
    await provider.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  describe('when it executes an operation', () => {
    it('should POST the params to {baseUrl}/{operation} with the key, operation id, tenant and bearer token', async () => {
      behaviour = (res) => json(res, 201, { result: { ticket: 't-1' }, provider_ref: 'ref-9' });
      const request = providerRequest('open_ticket', { subject: 'hello' });
      expect(await provider.execute(request)).toEqual({
        status: 'ok',
        result: { ticket: 't-1' },
        providerRef: 'ref-9',
      });
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        method: 'POST',
        url: '/api/open_ticket',
        body: '{"subject":"hello"}',
      });
      expect(seen[0]?.headers).toMatchObject({
        'idempotency-key': request.idempotencyKey,
        'x-callgate-operation-id': request.operationId,
        'x-callgate-tenant-id': request.tenantId,
        authorization: 'Bearer tok-123456',
        'content-type': 'application/json',
      });
    });
  });

  describe('when the system of record answers with a status', () => {
    const table: ReadonlyArray<{ status: number; retryable: boolean; code: string }> = [
      { status: 400, retryable: false, code: 'bad_input' },
      { status: 404, retryable: false, code: 'bad_input' },
      { status: 409, retryable: true, code: 'bad_input' },
      { status: 423, retryable: true, code: 'bad_input' },
      { status: 429, retryable: true, code: 'bad_input' },
      // Its own 503 says it turned the request away unprocessed.
      { status: 503, retryable: true, code: 'bad_input' },
    ];
    for (const row of table) {
      it(`should classify ${row.status} as a ${row.retryable ? 'retryable' : 'final'} failure`, async () => {
        behaviour = (res) => json(res, row.status, { error: { code: 'bad_input', message: 'no' } });
        expect(await provider.execute(providerRequest('x', {}))).toEqual({
          status: 'failed',
          retryable: row.retryable,
          code: row.code,
          message: 'no',
        });
      });
    }

    it('should use a callgate code when the failure body is not JSON', async () => {
      behaviour = (res) => res.writeHead(429).end('<html>slow down</html>');
      expect(await provider.execute(providerRequest('x', {}))).toMatchObject({
        status: 'failed',
        retryable: true,
        code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
      });
    });

    // A 5xx may come after the system of record acted on the request: never a definite failure.
    it.each([
      [
        500,
        () => (res: ServerResponse) =>
          json(res, 500, { error: { code: 'bad_input', message: 'no' } }),
      ],
      [502, () => (res: ServerResponse) => res.writeHead(502).end('<html>bad gateway</html>')],
      [504, () => (res: ServerResponse) => res.writeHead(504).end('gateway timeout')],
    ])('should throw outcome unknown for %i', async (_status, make) => {
      behaviour = make();
      const error: unknown = await provider
        .execute(providerRequest('x', {}))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderOutcomeUnknownError);
      expect((error as Error).cause).toMatchObject({ code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE' });
    });
  });

  describe('when the connection breaks mid-answer', () => {
    it('should throw outcome unknown', async () => {
      behaviour = (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"result":');
        setTimeout(() => res.destroy(), 10);
      };
      await expect(provider.execute(providerRequest('x', {}))).rejects.toBeInstanceOf(
        ProviderOutcomeUnknownError,
      );
    });
  });

  describe('when the answer does not come within timeoutMs', () => {
    it('should throw outcome unknown with the timeout code', async () => {
      behaviour = () => undefined;
      const error: unknown = await provider
        .execute(providerRequest('x', {}))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderOutcomeUnknownError);
      expect((error as Error).cause).toMatchObject({ code: 'CALLGATE_ERR_PROVIDER_TIMEOUT' });
    });
  });

  describe('when it looks an operation up', () => {
    it('should GET {baseUrl}/operations/{id} and map the answers', async () => {
      const request = providerRequest('x', {});
      behaviour = (res) =>
        json(res, 200, { status: 'committed', result: { a: 1 }, provider_ref: 'r' });
      expect(await provider.lookup(request)).toEqual({
        status: 'committed',
        result: { a: 1 },
        providerRef: 'r',
      });
      expect(seen[0]).toMatchObject({
        method: 'GET',
        url: `/api/operations/${request.operationId}`,
      });
      behaviour = (res) => json(res, 404, {});
      expect(await provider.lookup(request)).toEqual({ status: 'not_found' });
      behaviour = (res) => res.writeHead(200).end('garbage');
      expect(await provider.lookup(request)).toMatchObject({ status: 'unknown' });
      behaviour = () => undefined;
      expect(await provider.lookup(request)).toMatchObject({ status: 'unknown' });
    });
  });

  describe('when it cancels', () => {
    it('should POST {baseUrl}/operations/{id}/cancel and throw outcome unknown on an unclear answer', async () => {
      const request = providerRequest('x', {});
      behaviour = (res) => json(res, 200, { status: 'cancelled' });
      expect(await provider.cancel(request)).toEqual({ status: 'cancelled' });
      expect(seen[0]).toMatchObject({
        method: 'POST',
        url: `/api/operations/${request.operationId}/cancel`,
      });
      behaviour = (res) => json(res, 501, {});
      expect(await provider.cancel(request)).toEqual({ status: 'not_supported' });
      behaviour = (res) => json(res, 500, {});
      await expect(provider.cancel(request)).rejects.toBeInstanceOf(ProviderOutcomeUnknownError);
    });
  });
});

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
