import { EventEmitter } from 'node:events';
import type Srf from 'drachtio-srf';
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { createSignalingDriver } from '../../../gateway/sip/create-signaling-driver.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';
import {
  MAX_RECONNECT_DELAY_MS,
  calledNumberOf,
  drachtioConnection,
  reconnectDelay,
  sipfragProgress,
} from '../../../gateway/sip/drachtio/drachtio-mapping.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';

const sip = sipSchema.parse({
  driver: 'drachtio',
  drachtio: { host: '127.0.0.1', port: 9022, secretEnv: 'DRACHTIO_SECRET', reconnectMs: 100 },
});

describe('when the drachtio connection is read from config', () => {
  it('should take host and port from config and the secret from the named variable', () => {
    expect(
      drachtioConnection(sip, (name) => (name === 'DRACHTIO_SECRET' ? 'cymru' : undefined)),
    ).toEqual({ host: '127.0.0.1', port: 9022, secret: 'cymru' });
  });

  it('should refuse to connect without a secret, naming the variable', () => {
    expect(() => drachtioConnection(sip, () => undefined)).toThrow(/DRACHTIO_SECRET is not set/);
  });

  it('should select the driver the config names', () => {
    expect(
      createSignalingDriver({ sip, tenants: [] }, new Logger({ level: 'error' })),
    ).toBeInstanceOf(DrachtioSignalingDriver);
    expect(
      createSignalingDriver(
        { sip: sipSchema.parse({}), tenants: [] },
        new Logger({ level: 'error' }),
      ),
    ).toBeInstanceOf(BuiltinSignalingDriver);
  });
});

describe('when mapping drachtio messages', () => {
  it.each([
    ['SIP/2.0 100 Trying', { state: 'trying', status: 100 }],
    ['SIP/2.0 180 Ringing\r\n', { state: 'ringing', status: 180 }],
    ['SIP/2.0 200 OK', { state: 'succeeded', status: 200 }],
    ['SIP/2.0 486 Busy Here', { state: 'failed', status: 486, reason: 'Busy Here' }],
    ['garbage', undefined],
  ])('should read the sipfrag %s', (body, expected) => {
    expect(sipfragProgress(body)).toEqual(expected);
  });

  it('should find the called number in the Request-URI, else To', () => {
    expect(calledNumberOf('sip:+15550100@gw;user=phone', '<sip:1@gw>')).toBe('+15550100');
    expect(calledNumberOf('sip:gw', '"x" <sip:200@gw>;tag=1')).toBe('200');
    expect(calledNumberOf('tel:+1555', '')).toBe('+1555');
  });
});

describe('when the drachtio-server connection drops', () => {
  it('should back off by doubling from reconnectMs up to the cap', () => {
    expect([0, 1, 2, 3].map((attempt) => reconnectDelay(attempt, 100))).toEqual([
      100, 200, 400, 800,
    ]);
    expect(reconnectDelay(40, 2000)).toBe(MAX_RECONNECT_DELAY_MS);
  });

  it('should call connect again after srf reports close and stop retrying after stop()', async () => {
    const fake = new EventEmitter() as EventEmitter & { connects: number };
    fake.connects = 0;
    Object.assign(fake, {
      connect: () => {
        fake.connects += 1;
        return Promise.resolve();
      },
      invite: () => undefined,
      options: () => undefined,
      disconnect: () => undefined,
    });
    const driver = new DrachtioSignalingDriver({
      sip,
      tenants: [
        tenantSchema.parse({
          id: 'acme',
          numbers: ['100'],
          agent: 'a',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        }),
      ],
      logger: new Logger({ level: 'error' }),
      readSecret: () => 'cymru',
      srf: fake as unknown as Srf,
    });
    await driver.start();
    expect(fake.connects).toBe(1);
    fake.emit('close');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(fake.connects).toBe(2);
    await driver.stop();
    fake.emit('close');
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(fake.connects).toBe(2);
  });
});
