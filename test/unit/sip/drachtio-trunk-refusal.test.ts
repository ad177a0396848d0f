/**
 * The drachtio driver refuses a source outside the tenant's allowlist with 403 and an unknown
 * number with 404 before anything of a call exists: the application (which opens the model session
 * and takes the RTP port) is never handed the call. Tested without a drachtio-server: INVITEs are
 * handed to the driver as srf would (test/e2e/sip-trunk-refusal-costs-nothing.test.ts is the
 * built-in stack against sipp).
 */
import { EventEmitter } from 'node:events';
import type Srf from 'drachtio-srf';
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';

let sequence = 0;

function srfInvite(
  source: string,
  number: string,
): { req: Srf.SrfRequest; res: Srf.SrfResponse; sent: number[] } {
  sequence += 1;
  const sdp =
    'v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n';
  const raw = [
    `INVITE sip:${number}@127.0.0.1 SIP/2.0`,
    `Via: SIP/2.0/UDP ${source.includes(':') ? `[${source}]` : source}:5060;branch=z9hG4bKrefuse${sequence}`,
    'Max-Forwards: 70',
    'From: <sip:alice@example.com>;tag=a1',
    `To: <sip:${number}@127.0.0.1>`,
    `Call-ID: refuse-${sequence}`,
    'CSeq: 1 INVITE',
    'Content-Type: application/sdp',
    `Content-Length: ${Buffer.byteLength(sdp)}`,
    '',
    sdp,
  ].join('\r\n');
  const sent: number[] = [];
  const req = Object.assign(new EventEmitter(), {
    raw,
    source_address: source,
    source_port: 5060,
    protocol: 'udp',
    get: () => undefined,
  });
  const res = { send: (status: number) => sent.push(status) };
  return { req: req as unknown as Srf.SrfRequest, res: res as unknown as Srf.SrfResponse, sent };
}

function driverWithTenant(): { driver: DrachtioSignalingDriver; calls: string[] } {
  const calls: string[] = [];
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
  driver.onCall((call) => {
    calls.push(call.callId);
    call.reject(486);
  });
  return { driver, calls };
}

function offer(driver: DrachtioSignalingDriver, source: string, number: string): number[] {
  const { req, res, sent } = srfInvite(source, number);
  driver.receiveInvite(req, res);
  return sent;
}

describe('when INVITEs reach the drachtio driver from a refused source or for an unknown number', () => {
  it('should answer 403 and 404 and never hand a call to the application', () => {
    const { driver, calls } = driverWithTenant();
    expect(offer(driver, '198.51.100.7', '100')).toEqual([403]);
    expect(offer(driver, '2001:db8::7', '100')).toEqual([403]);
    expect(offer(driver, '192.0.2.9', '999')).toEqual([404]);
    expect(calls).toEqual([]);
  });

  it('should hand over a call from a source inside the allowlist', () => {
    const { driver, calls } = driverWithTenant();
    expect(offer(driver, '192.0.2.9', '100')).toEqual([486]);
    expect(calls).toHaveLength(1);
  });
});
