import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_MAX_BODY_BYTES } from '../../../jobs/providers/sandbox/sandbox-server.ts';
import { rawPost, startSandboxFixture, type SandboxFixture } from './sandbox-fixture.ts';

describe('when the sandbox receives bad input', () => {
  let sandbox: SandboxFixture;

  beforeAll(async () => {
    sandbox = await startSandboxFixture();
  });
  afterAll(async () => {
    await sandbox.close();
  });

  const cases: ReadonlyArray<{
    name: string;
    path: string;
    body: string;
    headers?: Record<string, string>;
    status: number;
    code: string;
  }> = [
    {
      name: 'malformed JSON',
      path: '/bookings/book',
      body: '{"restaurant": ',
      status: 400,
      code: 'malformed_json',
    },
    {
      name: 'a JSON array',
      path: '/payments/refund',
      body: '[1,2]',
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'missing fields',
      path: '/bookings/book',
      body: '{"restaurant":"trattoria-roma"}',
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'a negative refund',
      path: '/payments/refund',
      body: '{"order_id":"ord_1001","amount_cents":-5}',
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'an impossible date',
      path: '/bookings/book',
      body: '{"restaurant":"trattoria-roma","date":"2031-02-30","time":"19:00","party_size":2,"name":"A"}',
      status: 400,
      code: 'invalid_request',
    },
    {
      name: 'an unknown operation',
      path: '/payments/charge',
      body: '{}',
      status: 404,
      code: 'not_found',
    },
    {
      name: 'an unknown fault directive',
      path: '/payments/refund',
      body: '{}',
      headers: { 'x-sandbox-fault': 'explode' },
      status: 400,
      code: 'invalid_fault',
    },
    {
      name: 'an oversized body',
      path: '/bookings/book',
      body: JSON.stringify({ name: 'x'.repeat(SANDBOX_MAX_BODY_BYTES) }),
      status: 413,
      code: 'payload_too_large',
    },
  ];

  for (const c of cases) {
    it(`should answer ${c.status} ${c.code} to ${c.name} and commit nothing`, async () => {
      const response = await rawPost(sandbox.url, c.path, c.body, c.headers);
      expect(response.status).toBe(c.status);
      expect(await response.json()).toMatchObject({ error: { code: c.code } });
      expect(await sandbox.effects()).toHaveLength(0);
    });
  }

  it('should refuse an invalid fault rule with 400', async () => {
    const response = await rawPost(
      sandbox.url,
      '/admin/faults',
      JSON.stringify({ fault: 'latency=abc' }),
    );
    expect(response.status).toBe(400);
  });

  it('should keep serving after all of it', async () => {
    const response = await fetch(`${sandbox.url}/healthz`);
    expect(await response.json()).toEqual({ ok: true });
  });
});
