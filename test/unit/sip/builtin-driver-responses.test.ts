/**
 * The stack's answers to requests that never reach the application, driven over a real UDP socket
 * on loopback: what goes back on the wire, and what is dropped and counted.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { registry } from '../../../config/metrics.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';

let driver: BuiltinSignalingDriver;
let client: Socket;
let port = 0;

beforeAll(async () => {
  driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'] }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
      }),
    ],
    logger: new Logger({ level: 'error' }),
  });
  driver.onCall((call) => call.accept({ local: { address: '127.0.0.1', port: 40_000 } }));
  await driver.start();
  port = driver.port('udp') ?? 0;
  client = createSocket('udp4');
  await new Promise<void>((resolve) => client.bind(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  client.close();
  await driver.stop();
});

let sequence = 0;
function request(
  method: string,
  options: { headers?: Record<string, string>; toTag?: string; body?: string; uri?: string } = {},
): string {
  sequence += 1;
  const headers: Record<string, string> = {
    Via: `SIP/2.0/UDP 127.0.0.1:${client.address().port};branch=z9hG4bKunit${sequence}`,
    'Max-Forwards': '70',
    From: '<sip:alice@example.com>;tag=a1',
    To: `<sip:100@127.0.0.1>${options.toTag !== undefined ? `;tag=${options.toTag}` : ''}`,
    'Call-ID': `unit-${sequence}`,
    CSeq: `1 ${method}`,
    ...options.headers,
  };
  const body = options.body ?? '';
  return `${method} ${options.uri ?? 'sip:100@127.0.0.1'} SIP/2.0\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/**
 * Sends one datagram and collects what comes back within `waitMs` for the same Call-ID (earlier
 * INVITE rejections keep being retransmitted by Timer G since these tests never ACK them).
 */
async function exchange(
  text: string | Buffer,
  waitMs = 150,
  from: Socket = client,
): Promise<string[]> {
  const replies: string[] = [];
  const callId = /Call-ID: (\S+)/.exec(text.toString())?.[1];
  const onMessage = (data: Buffer): void => {
    const reply = data.toString();
    if (callId === undefined || reply.includes(`Call-ID: ${callId}\r\n`)) replies.push(reply);
  };
  from.on('message', onMessage);
  from.send(typeof text === 'string' ? Buffer.from(text) : text, port, '127.0.0.1');
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  from.off('message', onMessage);
  return replies;
}

async function counterValue(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  const value = metric?.values.find((v) =>
    Object.entries(labels).every(([k, l]) => v.labels[k] === l),
  );
  return value?.value ?? 0;
}

describe('when a request cannot be served', () => {
  it.each<[string, () => string, RegExp]>([
    [
      'Max-Forwards 0 with 483',
      () => request('OPTIONS', { headers: { 'Max-Forwards': '0' } }),
      /^SIP\/2\.0 483 Too Many Hops/,
    ],
    [
      'an unsupported Require with 420 and Unsupported',
      () => request('OPTIONS', { headers: { Require: 'foo, replaces' } }),
      /^SIP\/2\.0 420 Bad Extension[\s\S]*Unsupported: foo\r\n/,
    ],
    [
      'an unknown method with 405 and Allow',
      () => request('PUBLISH'),
      /^SIP\/2\.0 405 Method Not Allowed[\s\S]*Allow: INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY\r\n/,
    ],
    ['a BYE outside any dialog with 481', () => request('BYE'), /^SIP\/2\.0 481 /],
    [
      'an INFO for an unknown dialog with 481',
      () => request('INFO', { toTag: 'nope' }),
      /^SIP\/2\.0 481 /,
    ],
    ['a CANCEL matching no INVITE with 481', () => request('CANCEL'), /^SIP\/2\.0 481 /],
    [
      'an INVITE with a body that is not SDP with 415',
      () => request('INVITE', { headers: { 'Content-Type': 'text/plain' }, body: 'hi' }),
      /^SIP\/2\.0 415 /,
    ],
    [
      'an INVITE with broken SDP with 488',
      () => request('INVITE', { headers: { 'Content-Type': 'application/sdp' }, body: 'x=1' }),
      /^SIP\/2\.0 488 /,
    ],
    [
      'an INVITE with no common codec with 488',
      () =>
        request('INVITE', {
          headers: { 'Content-Type': 'application/sdp' },
          body: 'v=0\r\no=- 1 1 IN IP4 h\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 18\r\n',
        }),
      /^SIP\/2\.0 488 /,
    ],
    [
      'an INVITE for an unknown number with 404',
      () => request('INVITE', { uri: 'sip:555@127.0.0.1', headers: { To: '<sip:555@127.0.0.1>' } }),
      /^SIP\/2\.0 404 Not Found/,
    ],
    [
      'an unsupported SIP version with 505',
      () => request('OPTIONS').replace('sip:100@127.0.0.1 SIP/2.0', 'sip:100@127.0.0.1 SIP/3.0'),
      /^SIP\/2\.0 505 /,
    ],
    [
      'a malformed but routable request with 400 and the reason',
      () => request('OPTIONS', { headers: { CSeq: '1 BYE' } }),
      /^SIP\/2\.0 400 Bad Request[\s\S]*Warning: 399 callgate "CSeq method BYE does not match OPTIONS"/,
    ],
  ])('should answer %s', async (_what, text, expected) => {
    const replies = await exchange(text());
    expect(replies.at(-1)).toMatch(expected);
  });

  it('should answer OPTIONS outside a dialog with 200, Allow and a To tag', async () => {
    const [reply] = await exchange(request('OPTIONS'));
    expect(reply).toMatch(/^SIP\/2\.0 200 OK/);
    expect(reply).toMatch(/\r\nTo: <sip:100@127\.0\.0\.1>;tag=[0-9a-f]+\r\n/);
    // The sent-by address is the source address, so no received parameter is needed.
    expect(reply).toMatch(/\r\nVia: SIP\/2\.0\/UDP 127\.0\.0\.1:\d+;branch=z9hG4bKunit\d+\r\n/);
  });

  it('should route the response to the rport of a client behind NAT (RFC 3581)', async () => {
    const text = request('OPTIONS').replace(
      /(Via: SIP\/2\.0\/UDP )127\.0\.0\.1:\d+(;branch=\S+)/,
      '$110.9.9.9:5999$2;rport',
    );
    const [reply] = await exchange(text);
    expect(reply).toMatch(
      new RegExp(
        `Via: SIP/2\\.0/UDP 10\\.9\\.9\\.9:5999;branch=z9hG4bKunit\\d+;received=127\\.0\\.0\\.1;rport=${client.address().port}\\r\\n`,
      ),
    );
  });

  it('should answer a retransmitted OPTIONS with the same response without a second transaction', async () => {
    const text = request('OPTIONS');
    const first = await exchange(text);
    const second = await exchange(text);
    expect(second).toEqual(first);
  });
});

describe('when garbage arrives', () => {
  it('should drop it without an answer and count it', async () => {
    const fresh = createSocket('udp4');
    await new Promise<void>((resolve) => fresh.bind(0, '127.0.0.1', resolve));
    const before = await counterValue('callgate_sip_parse_failures_total', { outcome: 'dropped' });
    const replies = await exchange(
      Buffer.from([0x00, 0xff, 0x13, 0x37, 0x0a, 0x0d, 0x41]),
      150,
      fresh,
    );
    const noVia = await exchange('INVITE sip:100@127.0.0.1 SIP/2.0\r\nFrom: x\r\n\r\n', 150, fresh);
    fresh.close();
    expect(replies).toEqual([]);
    expect(noVia).toEqual([]);
    expect(await counterValue('callgate_sip_parse_failures_total', { outcome: 'dropped' })).toBe(
      before + 2,
    );
  });

  it('should keep serving after 2,000 random datagrams', async () => {
    for (let i = 0; i < 2000; i++) {
      const noise = Buffer.alloc(1 + (i % 300));
      for (let b = 0; b < noise.length; b++) noise[b] = (i * 31 + b * 7) & 0xff;
      client.send(noise, port, '127.0.0.1');
    }
    // Let the flood drain from the client's send queue first.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [reply] = await exchange(request('OPTIONS'), 300);
    expect(reply).toMatch(/^SIP\/2\.0 200 OK/);
  });
});
