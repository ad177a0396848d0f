/**
 * The call context on every request of an operation: execute, lookup, cancel and void all carry
 * the caller, whether it is verified, the called number and the session to the system of record.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpProvider } from '../../../jobs/providers/http-provider.ts';
import type { ProviderRequest } from '../../../jobs/providers/provider.ts';

const CALL = {
  caller: '+15550123',
  callerVerified: true,
  called: '+15550100',
  sessionId: 'ses_42',
};

const CALL_HEADERS = {
  'x-callgate-caller': '+15550123',
  'x-callgate-caller-verified': 'true',
  'x-callgate-called': '+15550100',
  'x-callgate-session-id': 'ses_42',
};

describe('when the generic HTTP provider sends the requests of an operation', () => {
  let server: Server;
  let provider: HttpProvider;
  const seen: { path: string; headers: IncomingHttpHeaders }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ path: `${req.method} ${req.url}`, headers: req.headers });
        const url = req.url ?? '';
        const body = url.endsWith('/void')
          ? { status: 'voided' }
          : url.endsWith('/cancel')
            ? { status: 'cancelled' }
            : req.method === 'GET'
              ? { status: 'committed', result: { booking_id: 'b1' } }
              : { result: { booking_id: 'b1' } };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    provider = new HttpProvider({
      name: 'records',
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      honoursIdempotencyKeys: false,
      supportsCancel: true,
      supportsVoid: true,
      timeoutMs: 1_000,
    });
  });

  afterAll(async () => {
    await provider.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const request = (call?: ProviderRequest['call']): Omit<ProviderRequest, 'params'> => ({
    operationId: 'op_01TEST',
    idempotencyKey: 'idk_test',
    attemptToken: 'tok1',
    tenantId: 'acme',
    operation: 'book',
    ...(call !== undefined ? { call } : {}),
    signal: AbortSignal.timeout(2_000),
  });

  it('should send the call headers on execute, lookup, cancel and void', async () => {
    seen.length = 0;
    await provider.execute({ ...request(CALL), params: { party_size: 2 } });
    await provider.lookup(request(CALL));
    await provider.cancel(request(CALL));
    await provider.voidAttempts({ ...request(CALL), attemptTokens: ['tok0'] });
    expect(seen.map((s) => s.path)).toEqual([
      'POST /book',
      'GET /operations/op_01TEST',
      'POST /operations/op_01TEST/cancel',
      'POST /operations/op_01TEST/void',
    ]);
    for (const { headers } of seen) {
      expect(headers).toMatchObject({
        ...CALL_HEADERS,
        'idempotency-key': 'idk_test',
        'x-callgate-operation-id': 'op_01TEST',
        'x-callgate-tenant-id': 'acme',
      });
    }
  });

  it('should leave the call headers out when the operation has no call context', async () => {
    seen.length = 0;
    await provider.execute({ ...request(), params: {} });
    await provider.lookup(request({ caller: 'evil\r\nX-Injected: 1', sessionId: '' }));
    for (const { headers } of seen) {
      expect(Object.keys(headers).filter((name) => name.startsWith('x-callgate-c'))).toEqual([]);
      expect(headers['x-callgate-session-id']).toBeUndefined();
      expect(headers['x-injected']).toBeUndefined();
    }
  });
});
