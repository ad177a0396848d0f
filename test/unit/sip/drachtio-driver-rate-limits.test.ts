/**
 * The drachtio driver applies the same per-source limits as the built-in stack, tested without a
 * drachtio-server: INVITEs are handed to the driver as srf would, and the test reads what the
 * driver asked srf to send.
 */
import { EventEmitter } from 'node:events';
import type Srf from 'drachtio-srf';
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';

interface Sent {
  readonly status: number;
  readonly headers: Record<string, string>;
}

let sequence = 0;

function srfInvite(
  source: string,
  authorization?: string,
  body?: { type: string; text: string },
): { req: Srf.SrfRequest; res: Srf.SrfResponse; sent: Sent[] } {
  sequence += 1;
  const raw = [
    'INVITE sip:100@127.0.0.1 SIP/2.0',
    `Via: SIP/2.0/UDP ${source}:5060;branch=z9hG4bKsrf${sequence}`,
    'Max-Forwards: 70',
    'From: <sip:alice@example.com>;tag=a1',
    'To: <sip:100@127.0.0.1>',
    `Call-ID: srf-${sequence}`,
    'CSeq: 1 INVITE',
    ...(authorization !== undefined ? [`Authorization: ${authorization}`] : []),
    ...(body !== undefined ? [`Content-Type: ${body.type}`] : []),
    `Content-Length: ${Buffer.byteLength(body?.text ?? '')}`,
    '',
    body?.text ?? '',
  ].join('\r\n');
  const sent: Sent[] = [];
  const req = Object.assign(new EventEmitter(), {
    raw,
    source_address: source,
    source_port: 5060,
    protocol: 'udp',
    get: () => undefined,
  });
  const res = {
    send: (
      status: number,
      reasonOrOptions?: string | { headers?: Record<string, string> },
      options?: { headers?: Record<string, string> },
    ) => {
      const headers =
        (typeof reasonOrOptions === 'object' ? reasonOrOptions.headers : options?.headers) ?? {};
      sent.push({ status, headers });
    },
  };
  return { req: req as unknown as Srf.SrfRequest, res: res as unknown as Srf.SrfResponse, sent };
}

function driverWith(
  sip: Record<string, unknown>,
  trunk: Record<string, unknown>,
  now: () => number,
): { driver: DrachtioSignalingDriver; calls: string[] } {
  const calls: string[] = [];
  const driver = new DrachtioSignalingDriver({
    sip: sipSchema.parse({ driver: 'drachtio', ...sip }),
    tenants: [tenantSchema.parse({ id: 'acme', numbers: ['100'], agent: 'front-desk', trunk })],
    logger: new Logger({ level: 'error' }),
    readSecret: (name) => (name === 'PW' ? 'right-password' : undefined),
    srf: new EventEmitter() as unknown as Srf,
    now,
  });
  driver.onCall((call) => {
    calls.push(call.callId);
    call.reject(486);
  });
  return { driver, calls };
}

function offer(
  driver: DrachtioSignalingDriver,
  source: string,
  authorization?: string,
): Sent | undefined {
  const { req, res, sent } = srfInvite(source, authorization);
  driver.receiveInvite(req, res);
  return sent[0];
}

describe('when a source sends more INVITEs a second than inviteRatePerSource (drachtio)', () => {
  it('should answer the excess 503 with Retry-After and keep it from the application', () => {
    let now = 0;
    const { driver, calls } = driverWith(
      { inviteRatePerSource: 2 },
      { allowFrom: ['192.0.2.0/24'] },
      () => now,
    );
    const statuses = [
      offer(driver, '192.0.2.1'),
      offer(driver, '192.0.2.1'),
      offer(driver, '192.0.2.1'),
      offer(driver, '192.0.2.9'),
    ];
    expect(statuses).toEqual([
      { status: 486, headers: {} },
      { status: 486, headers: {} },
      { status: 503, headers: { 'Retry-After': '1' } },
      { status: 486, headers: {} },
    ]);
    now += 500;
    expect(offer(driver, '192.0.2.1')?.status).toBe(486);
    expect(calls).toHaveLength(4);
  });
});

describe('when a source fails authentication authFailuresPerMinute times (drachtio)', () => {
  it('should answer 503 with Retry-After instead of another challenge, until a failure has expired', () => {
    let now = 0;
    const { driver, calls } = driverWith(
      { authFailuresPerMinute: 2 },
      { digest: { realm: 'r', username: 'u', passwordEnv: 'PW' } },
      () => now,
    );
    const challenge = offer(driver, '192.0.2.1');
    expect(challenge?.status).toBe(401);
    const nonce = /nonce="([^"]+)"/.exec(challenge?.headers['WWW-Authenticate'] ?? '')?.[1] ?? '';
    const wrong = `Digest username="u", realm="r", nonce="${nonce}", uri="sip:100@127.0.0.1", response="00000000000000000000000000000000"`;
    expect([
      offer(driver, '192.0.2.1', wrong)?.status,
      offer(driver, '192.0.2.1', wrong)?.status,
    ]).toEqual([403, 403]);
    // At 2 a minute, one failure comes back every 30 s.
    expect(offer(driver, '192.0.2.1', wrong)).toEqual({
      status: 503,
      headers: { 'Retry-After': '30' },
    });
    expect(offer(driver, '192.0.2.1')).toEqual({ status: 503, headers: { 'Retry-After': '30' } });
    expect(offer(driver, '192.0.2.2')?.status).toBe(401);
    now += 30_000;
    expect(offer(driver, '192.0.2.1')?.status).toBe(401);
    expect(calls).toHaveLength(0);
  });

  it('should count a stale or unknown nonce as a failure, but not a first INVITE without credentials', () => {
    const { driver } = driverWith(
      { authFailuresPerMinute: 1 },
      { digest: { realm: 'r', username: 'u', passwordEnv: 'PW' } },
      () => 0,
    );
    expect([offer(driver, '192.0.2.1')?.status, offer(driver, '192.0.2.1')?.status]).toEqual([
      401, 401,
    ]);
    const unknownNonce =
      'Digest username="u", realm="r", nonce="never-issued", uri="sip:100@127.0.0.1", response="0"';
    expect(offer(driver, '192.0.2.1', unknownNonce)?.status).toBe(401);
    expect(offer(driver, '192.0.2.1')?.status).toBe(503);
  });
});

describe('when the application handler throws (drachtio)', () => {
  it('should answer 500 rather than let the error into srf', () => {
    const driver = new DrachtioSignalingDriver({
      sip: sipSchema.parse({ driver: 'drachtio' }),
      tenants: [
        tenantSchema.parse({
          id: 'acme',
          numbers: ['100'],
          agent: 'front-desk',
          trunk: { allowFrom: ['192.0.2.0/24'] },
        }),
      ],
      logger: new Logger({ level: 'error', sink: { write: () => undefined } }),
      srf: new EventEmitter() as unknown as Srf,
    });
    driver.onCall(() => {
      throw new Error('application bug');
    });
    expect(offer(driver, '192.0.2.1')?.status).toBe(500);
  });
});

describe('when an INVITE carries a body that is not SDP (drachtio)', () => {
  it('should answer 415 with Accept, as the built-in stack does', () => {
    const { driver, calls } = driverWith({}, { allowFrom: ['192.0.2.0/24'] }, () => 0);
    const { req, res, sent } = srfInvite('192.0.2.1', undefined, {
      type: 'text/plain',
      text: 'hello',
    });
    driver.receiveInvite(req, res);
    expect(sent).toEqual([{ status: 415, headers: { Accept: 'application/sdp' } }]);
    expect(calls).toHaveLength(0);
  });
});
