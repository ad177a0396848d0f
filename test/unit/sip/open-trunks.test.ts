/** Which open tenants a start warns about: only where SIP is reachable beyond loopback. */
import { describe, expect, it } from 'vitest';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { openTenantsOnPublicListener } from '../../../gateway/sip/open-trunks.ts';

const tenants = [
  tenantSchema.parse({ id: 'lobby', numbers: ['1'], agent: 'a', trunk: { open: true } }),
  tenantSchema.parse({ id: 'acme', numbers: ['2'], agent: 'a', trunk: { allowFrom: ['::1'] } }),
];

describe('when a tenant takes calls from anyone', () => {
  it.each([
    ['the built-in stack on 127.0.0.1', { listen: '127.0.0.1' }, []],
    ['the built-in stack on 127.0.0.2', { listen: '127.0.0.2' }, []],
    ['the built-in stack on ::1', { listen: '::1' }, []],
    ['the built-in stack on 0.0.0.0', { listen: '0.0.0.0' }, ['lobby']],
    ['the built-in stack on a public address', { listen: '203.0.113.5' }, ['lobby']],
    ['the built-in stack on ::', { listen: '::' }, ['lobby']],
    ['the built-in stack on IPv4-mapped loopback', { listen: '::ffff:127.0.0.1' }, []],
    [
      'the built-in stack on an IPv4-mapped public address',
      { listen: '::ffff:192.0.2.1' },
      ['lobby'],
    ],
    ['drachtio, whose listeners callgate does not set', { driver: 'drachtio' }, ['lobby']],
  ])('should name it for a warning with %s', (_what, sip, expected) => {
    expect(openTenantsOnPublicListener({ sip: sipSchema.parse(sip), tenants })).toEqual(expected);
  });
});
