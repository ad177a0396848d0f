/**
 * The built-in stack's per-source limits on the wire: a source over its INVITE rate, or one that
 * failed authentication authFailuresPerMinute times, is answered 503 with Retry-After and never
 * reaches the application; other sources are served as before.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import { callIdOf, UdpSipPeer } from './udp-sip-peer.ts';

let driver: BuiltinSignalingDriver | undefined;
const peers: UdpSipPeer[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.close();
  await driver?.stop();
  driver = undefined;
});

const SDP =
  'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n';

async function start(
  sip: Record<string, unknown>,
  trunk: Record<string, unknown> = { allowFrom: ['127.0.0.0/8'] },
  now?: () => number,
): Promise<{ port: number; calls: string[] }> {
  const calls: string[] = [];
  driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'], ...sip }),
    tenants: [tenantSchema.parse({ id: 'acme', numbers: ['100'], agent: 'front-desk', trunk })],
    logger: new Logger({ level: 'error' }),
    readSecret: (name) => (name === 'PW' ? 'right-password' : undefined),
    ...(now !== undefined ? { now } : {}),
  });
  driver.onCall((call) => {
    calls.push(call.callId);
    call.reject(486);
  });
  await driver.start();
  return { port: driver.port('udp') ?? 0, calls };
}

async function peer(address = '127.0.0.1'): Promise<UdpSipPeer> {
  const opened = await UdpSipPeer.open(address);
  peers.push(opened);
  return opened;
}

/** Sends an INVITE and returns its first final response. */
async function invite(
  from: UdpSipPeer,
  port: number,
  headers: Record<string, string> = {},
): Promise<string> {
  const text = from.request('INVITE', {
    headers: { 'Content-Type': 'application/sdp', ...headers },
    body: SDP,
  });
  from.send(text, port);
  return from.waitFor(callIdOf(text), /^SIP\/2\.0 [2-6]\d\d /);
}

const badAuthorization = (challenge: string): string => {
  const nonce = /nonce="([^"]+)"/.exec(challenge)?.[1] ?? '';
  return `Digest username="u", realm="r", nonce="${nonce}", uri="sip:100@127.0.0.1", response="00000000000000000000000000000000", algorithm=MD5`;
};

describe('when a source sends more INVITEs a second than inviteRatePerSource', () => {
  it('should answer the excess 503 with Retry-After and keep it from the application', async () => {
    const { port, calls } = await start({ inviteRatePerSource: 2 });
    const caller = await peer();
    const answers = await Promise.all([
      invite(caller, port),
      invite(caller, port),
      invite(caller, port),
    ]);
    expect(answers.map((a) => a.split('\r\n')[0]).sort()).toEqual([
      'SIP/2.0 486 Busy Here',
      'SIP/2.0 486 Busy Here',
      'SIP/2.0 503 Service Unavailable',
    ]);
    expect(answers.find((a) => a.startsWith('SIP/2.0 503'))).toMatch(/\r\nRetry-After: 1\r\n/);
    expect(calls).toHaveLength(2);
  });
});

describe('when a source fails authentication authFailuresPerMinute times', () => {
  it('should answer 503 with Retry-After instead of another challenge, until a failure has expired', async () => {
    let now = 1_000_000;
    const { port, calls } = await start(
      { authFailuresPerMinute: 3 },
      { digest: { realm: 'r', username: 'u', passwordEnv: 'PW' } },
      () => now,
    );
    const guesser = await peer();
    const challenge = await invite(guesser, port);
    expect(challenge).toMatch(/^SIP\/2\.0 401 /);
    const wrong = badAuthorization(challenge);
    const failures = [
      await invite(guesser, port, { Authorization: wrong }),
      await invite(guesser, port, { Authorization: wrong }),
      await invite(guesser, port, { Authorization: wrong }),
    ];
    expect(failures.map((f) => f.split('\r\n')[0])).toEqual([
      'SIP/2.0 403 Forbidden',
      'SIP/2.0 403 Forbidden',
      'SIP/2.0 403 Forbidden',
    ]);

    // Now blocked, with or without credentials; one failure comes back every 20 s at 3 a minute.
    const blocked = await invite(guesser, port, { Authorization: wrong });
    expect(blocked).toMatch(/^SIP\/2\.0 503 Service Unavailable\r\n/);
    expect(blocked).toMatch(/\r\nRetry-After: 20\r\n/);
    expect(blocked).not.toMatch(/WWW-Authenticate/);
    expect(await invite(guesser, port)).toMatch(/^SIP\/2\.0 503 [\s\S]*\r\nRetry-After: 20\r\n/);

    // Another source is still challenged.
    const other = await peer('127.0.0.2');
    expect(await invite(other, port)).toMatch(/^SIP\/2\.0 401 /);

    now += 20_000;
    expect(await invite(guesser, port)).toMatch(/^SIP\/2\.0 401 /);
    expect(calls).toHaveLength(0);
  });
});
