/**
 * Calls over SIP/TLS with real TLS sockets and certificates made by openssl: callgate answers on
 * the connection the INVITE came on (Via SIP/2.0/TLS, Contact ;transport=tls or sips:), sends its
 * BYE on that same connection, and a tenant with mutual TLS takes calls only from a client
 * certificate its CA issued with its name; a peer refuses callgate's certificate when it does not
 * trust it, and callgate refuses a peer whose certificate it does not trust.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sipMetrics } from '../../../gateway/sip/sip-metrics.ts';
import { makeTestPki, type TestPki } from '../../support/tls-certs.ts';
import { OFFER, startTlsDriver, type TlsDriver } from '../../support/tls-driver.ts';
import { TlsSipPeer } from '../../support/tls-sip-peer.ts';

let pki: TestPki;
let stack: TlsDriver;
const peers: TlsSipPeer[] = [];

beforeAll(async () => {
  pki = makeTestPki();
  stack = await startTlsDriver(pki);
});

afterAll(async () => {
  for (const peer of peers) peer.close();
  await stack.stop();
  pki.close();
});

const trusting = { ca: readFileSyncText(() => pki.caCert) };
function readFileSyncText(path: () => string): () => string {
  return () => readFileSync(path(), 'utf8');
}

async function openPeer(extra: Record<string, unknown> = {}): Promise<TlsSipPeer> {
  const peer = await TlsSipPeer.open(stack.port, { ca: trusting.ca(), ...extra });
  peers.push(peer);
  return peer;
}

const toTagOf = (text: string): string => /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(text)?.[1] ?? '';

async function failureCount(direction: string, reason: string): Promise<number> {
  const metric = await sipMetrics.tlsHandshakeFailures.get();
  return (
    metric.values.find((v) => v.labels.direction === direction && v.labels.reason === reason)
      ?.value ?? 0
  );
}

describe('when a trunk calls over TLS', () => {
  it('should answer on the same connection with a TLS Via and Contact, and send its BYE there', async () => {
    const peer = await openPeer();
    const callId = `tls-call-${process.pid}`;
    peer.send(peer.request('INVITE', { callId, body: OFFER }));
    const ok = await peer.waitFor(callId, /^SIP\/2\.0 200 /);
    expect(ok).toMatch(/\r\nVia: SIP\/2\.0\/TLS 127\.0\.0\.1:/);
    expect(ok).toMatch(/\r\nContact: <sip:callgate@127\.0\.0\.1:\d+;transport=tls>/);
    const toTag = toTagOf(ok);
    peer.send(peer.request('ACK', { callId, toTag }));
    const call = stack.calls.find((c) => c.callId === callId);
    expect(call?.source.transport).toBe('tls');
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The gateway ends the call: the BYE comes on the caller's connection (its Contact port is 9).
    const ended = call?.dialog.hangup();
    const bye = await peer.waitFor(callId, /^BYE sip:alice@127\.0\.0\.1:9;transport=tls SIP\/2\.0/);
    expect(bye).toMatch(/\r\nVia: SIP\/2\.0\/TLS /);
    const cseq = /\r\nCSeq: (\d+) BYE/.exec(bye)?.[1] ?? '2';
    const via = /\r\nVia: ([^\r]+)/.exec(bye)?.[1] ?? '';
    peer.send(
      `SIP/2.0 200 OK\r\nVia: ${via}\r\nFrom: ${/\r\nFrom: ([^\r]+)/.exec(bye)?.[1]}\r\nTo: ${/\r\nTo: ([^\r]+)/.exec(bye)?.[1]}\r\nCall-ID: ${callId}\r\nCSeq: ${cseq} BYE\r\nContent-Length: 0\r\n\r\n`,
    );
    await ended;
    expect(call?.dialog.state).toBe('terminated');
  });

  it('should answer a sips: request URI with a sips: Contact', async () => {
    const peer = await openPeer();
    const callId = `tls-sips-${process.pid}`;
    peer.send(peer.request('INVITE', { callId, uri: 'sips:100@127.0.0.1', body: OFFER }));
    const ok = await peer.waitFor(callId, /^SIP\/2\.0 200 /);
    expect(ok).toMatch(/\r\nContact: <sips:callgate@127\.0\.0\.1:\d+>/);
  });

  it('should be refused by a peer that does not trust callgate certificate', async () => {
    await expect(
      TlsSipPeer.open(stack.port, { ca: readFileSync(pki.wrongCaCert, 'utf8') }),
    ).rejects.toThrow(/self.signed|unable to (get|verify)/i);
  });
});

describe('when a tenant authenticates its trunk by mutual TLS', () => {
  const call = async (options: Record<string, unknown>, label: string): Promise<string> => {
    const peer = await openPeer(options);
    const callId = `mtls-${label}-${process.pid}`;
    peer.send(peer.request('INVITE', { callId, uri: 'sip:200@127.0.0.1', body: OFFER }));
    return (await peer.waitFor(callId, /^SIP\/2\.0 [2-6]\d\d /)).split('\r\n')[0] ?? '';
  };

  it('should take the call of a client certificate its CA issued with its name', async () => {
    expect(
      await call({ cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) }, 'good'),
    ).toBe('SIP/2.0 200 OK');
  });

  it.each([
    ['no client certificate', {}],
    ['a certificate of another CA', { wrong: true }],
    ['a certificate of its CA with another name', { other: true }],
  ])('should answer 403 to %s', async (what, kind: { wrong?: boolean; other?: boolean }) => {
    const files = kind.wrong
      ? { cert: pki.wrongClientCert, key: pki.wrongClientKey }
      : kind.other
        ? { cert: pki.serverCert, key: pki.serverKey }
        : undefined;
    const options =
      files === undefined ? {} : { cert: readFileSync(files.cert), key: readFileSync(files.key) };
    expect(await call(options, what.replace(/\W+/g, '-'))).toBe('SIP/2.0 403 Forbidden');
  });
});

describe('when callgate opens a TLS connection to a peer', () => {
  it('should refuse a peer whose certificate it does not trust, and count the failure', async () => {
    const impostor = createServer({
      cert: readFileSync(pki.wrongServerCert),
      key: readFileSync(pki.wrongServerKey),
    });
    let requests = 0;
    impostor.on('secureConnection', (socket) => socket.on('data', () => (requests += 1)));
    impostor.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    const address = impostor.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const before = await failureCount('outbound', 'certificate');
    const status = await stack.driver.ping(`sip:ping@127.0.0.1:${port};transport=tls`);
    impostor.close();
    expect(status).not.toBe(200);
    expect(requests).toBe(0);
    expect(await failureCount('outbound', 'certificate')).toBe(before + 1);
  });
});
