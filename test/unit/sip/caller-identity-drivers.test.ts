/**
 * Both signaling drivers attribute a call to the same caller: the same INVITEs (asserted identity
 * trusted, untrusted, malformed, absent) go to the built-in stack over UDP and to the drachtio
 * driver through a fake srf, and the identities they hand to the application are compared.
 */
import { EventEmitter } from 'node:events';
import type Srf from 'drachtio-srf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import type { CallerIdentity } from '../../../gateway/sip/caller-identity.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';
import type { InboundCall } from '../../../gateway/sip/signaling-driver.ts';
import { UdpSipPeer } from './udp-sip-peer.ts';

const tenants = [
  tenantSchema.parse({
    id: 'trusting',
    numbers: ['100'],
    agent: 'front-desk',
    trunk: { allowFrom: ['127.0.0.0/8'], trustAssertedIdentity: true },
  }),
  tenantSchema.parse({
    id: 'wary',
    numbers: ['200'],
    agent: 'front-desk',
    trunk: { allowFrom: ['127.0.0.0/8'] },
  }),
];
const quiet = (): Logger => new Logger({ level: 'error', sink: { write: () => undefined } });

const CASES: ReadonlyArray<
  readonly [what: string, number: string, pai: readonly string[], expected: CallerIdentity]
> = [
  [
    'a trusted assertion',
    '100',
    ['"Alice" <sip:+15550123@trunk;user=phone>', '<tel:+15550123>'],
    { caller: '+15550123', verified: true },
  ],
  [
    'an untrusted assertion',
    '200',
    ['<sip:+15550123@trunk>'],
    { caller: 'alice', verified: false },
  ],
  [
    'a malformed trusted assertion',
    '100',
    ['"Alice <sip:+15550123@trunk>'],
    { caller: 'alice', verified: false },
  ],
  ['no assertion', '100', [], { caller: 'alice', verified: false }],
];

/** The INVITE as `peer` sends it (its Via names the peer, so the built-in stack answers there). */
function invite(peer: UdpSipPeer, callId: string, number: string, pai: readonly string[]): string {
  const lines = pai.map((value) => `P-Asserted-Identity: ${value}\r\n`).join('');
  // Repeated header lines cannot be keys of one record: they go in ahead of Content-Length.
  return peer
    .request('INVITE', { callId, uri: `sip:${number}@127.0.0.1` })
    .replace('Content-Length:', `${lines}Content-Length:`);
}

let builtin: BuiltinSignalingDriver;
let peer: UdpSipPeer;
const builtinCalls: InboundCall[] = [];

beforeAll(async () => {
  builtin = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'] }),
    tenants,
    logger: quiet(),
  });
  builtin.onCall((call) => {
    builtinCalls.push(call);
    call.reject(486);
  });
  await builtin.start();
  peer = await UdpSipPeer.open();
});

afterAll(async () => {
  peer.close();
  await builtin.stop();
});

async function builtinIdentity(callId: string, text: string): Promise<CallerIdentity | undefined> {
  peer.send(text, builtin.port('udp') ?? 0);
  await peer.waitFor(callId, /^SIP\/2\.0 486 /);
  return builtinCalls.find((call) => call.callId === callId)?.identity;
}

function drachtioIdentity(text: string): CallerIdentity | undefined {
  const driver = new DrachtioSignalingDriver({
    sip: sipSchema.parse({ driver: 'drachtio' }),
    tenants,
    logger: quiet(),
    srf: new EventEmitter() as unknown as Srf,
  });
  let identity: CallerIdentity | undefined;
  driver.onCall((call) => {
    identity = call.identity;
  });
  const req = Object.assign(new EventEmitter(), {
    raw: text,
    source_address: '127.0.0.1',
    source_port: peer.port,
    protocol: 'udp',
  });
  driver.receiveInvite(
    req as unknown as Srf.SrfRequest,
    { send: () => undefined } as unknown as Srf.SrfResponse,
  );
  return identity;
}

describe('when the same INVITE reaches either driver', () => {
  it.each(CASES)('should attribute %s alike', async (_what, number, pai, expected) => {
    const callId = `identity-${number}-${pai.length}-${Math.random().toString(36).slice(2)}`;
    const text = invite(peer, callId, number, pai);
    expect(await builtinIdentity(callId, text)).toEqual(expected);
    expect(drachtioIdentity(text)).toEqual(expected);
  });
});
