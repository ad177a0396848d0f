/**
 * Hostile input on the SIP/TLS listener, with real sockets and certificates made by openssl: bytes
 * that are not TLS, handshakes that stall, more half-open connections from one source than it may
 * hold, a SIP message over the framing limit, and a connection left idle. Each is closed and
 * counted, nothing crashes, and a call from another source placed meanwhile completes.
 */
import { readFileSync } from 'node:fs';
import { connect as connectTcp, type Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { Counter } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sipMetrics } from '../../../gateway/sip/sip-metrics.ts';
import { makeTestPki, type TestPki } from '../../support/tls-certs.ts';
import { OFFER, startTlsDriver, type TlsDriver } from '../../support/tls-driver.ts';
import { TlsSipPeer } from '../../support/tls-sip-peer.ts';

/** The hostile peer's source; calls placed meanwhile come from another one. */
const HOSTILE = '127.0.0.1';
const CALLER = '127.0.0.2';
const HANDSHAKE_TIMEOUT_MS = 800;
const MAX_HANDSHAKES = 3;
const MAX_CONNECTIONS = 6;
const MAX_MESSAGE_BYTES = 2_048;
const IDLE_TIMEOUT_MS = 1_000;

let pki: TestPki;
let stack: TlsDriver;
let ca: string;
const opened: { destroy(): void }[] = [];

beforeAll(async () => {
  pki = makeTestPki();
  ca = readFileSync(pki.caCert, 'utf8');
  stack = await startTlsDriver(pki, {
    tls: {
      handshakeTimeoutMs: HANDSHAKE_TIMEOUT_MS,
      maxHandshakesPerSource: MAX_HANDSHAKES,
      maxConnectionsPerSource: MAX_CONNECTIONS,
    },
    sip: { transports: ['tcp', 'tls'], tcpPort: 0, maxMessageBytes: MAX_MESSAGE_BYTES },
  });
});

afterAll(async () => {
  for (const socket of opened) socket.destroy();
  await stack.stop();
  pki.close();
});

async function count(metric: Counter, labels: Record<string, string>): Promise<number> {
  const { values } = await metric.get();
  const found = values.find((v) =>
    Object.entries(labels).every(([name, value]) => v.labels[name] === value),
  );
  return found?.value ?? 0;
}

const handshakeFailures = (reason: string): Promise<number> =>
  count(sipMetrics.tlsHandshakeFailures, { direction: 'inbound', reason });
const refusals = (limit: string): Promise<number> => count(sipMetrics.rateLimited, { limit });
const drops = (reason: string): Promise<number> =>
  count(sipMetrics.parseFailures, { outcome: `dropped-${reason}` });

/** A plain TCP socket to a listener, with what it received and when callgate closed it. */
interface RawClient {
  readonly socket: Socket;
  readonly received: Buffer[];
  /** Milliseconds from connect to close; undefined while open. */
  closedAfterMs: number | undefined;
  readonly closed: Promise<number>;
}

function openRaw(port: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connectTcp({ host: '127.0.0.1', port, localAddress: HOSTILE });
    opened.push(socket);
    const received: Buffer[] = [];
    let connectedAt = 0;
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined);
    const client: RawClient = {
      socket,
      received,
      closedAfterMs: undefined,
      closed: new Promise((closed) =>
        socket.once('close', () => {
          client.closedAfterMs = Date.now() - connectedAt;
          closed(client.closedAfterMs);
        }),
      ),
    };
    socket.once('connect', () => {
      connectedAt = Date.now();
      resolve(client);
    });
    socket.once('error', reject);
  });
}

async function openPeer(localAddress: string): Promise<TlsSipPeer> {
  const options: ConnectionOptions & { localAddress: string } = { ca, localAddress };
  const peer = await TlsSipPeer.open(stack.port, options);
  opened.push(peer.socket);
  return peer;
}

const toTagOf = (text: string): string => /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(text)?.[1] ?? '';

/** A whole call over TLS from CALLER: INVITE, 200, ACK, BYE, 200. */
async function placeCall(label: string): Promise<void> {
  const peer = await openPeer(CALLER);
  try {
    const callId = `hostile-${label}-${process.pid}`;
    peer.send(peer.request('INVITE', { callId, body: OFFER }));
    const toTag = toTagOf(await peer.waitFor(callId, /^SIP\/2\.0 200 /));
    peer.send(peer.request('ACK', { callId, toTag }));
    peer.send(peer.request('BYE', { callId, toTag, cseq: 2 }));
    await peer.waitFor(callId, /^SIP\/2\.0 200 [\s\S]*\r\nCSeq: 2 BYE\r\n/);
    expect(stack.calls.some((call) => call.callId === callId)).toBe(true);
  } finally {
    peer.close();
  }
}

/** Bytes that make a ClientHello's first 11: record header, handshake header, client version. */
const CLIENT_HELLO_START = Buffer.from([
  0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc, 0x03, 0x03,
]);

/** Fixed pseudo-random bytes whose first is no TLS record type (0x14-0x17). */
function noise(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let state = 0x2545f491;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    bytes[i] = state >>> 24;
  }
  bytes[0] = 0xa7;
  return bytes;
}

async function settled(): Promise<void> {
  await vi.waitFor(
    () => expect(stack.driver.tlsConnectionCounts()).toEqual({ open: 0, handshaking: 0 }),
    {
      timeout: 3_000,
    },
  );
}

describe('when a peer sends bytes that are not TLS', () => {
  it.each([
    [
      'plain SIP text',
      Buffer.from(`INVITE sip:100@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TLS x\r\n\r\n`),
    ],
    ['an HTTP request', Buffer.from('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')],
    ['random bytes', noise(512)],
    ['a TLS record header with a length no record has', Buffer.from([0x16, 3, 1, 0xff, 0xff, 1])],
  ])(
    'should close the connection on %s, count it as not-tls, and go on taking calls',
    async (_what, bytes) => {
      const before = await handshakeFailures('not-tls');
      const client = await openRaw(stack.port);
      client.socket.write(bytes);
      const closedAfter = await client.closed;
      expect(closedAfter).toBeLessThan(HANDSHAKE_TIMEOUT_MS);
      expect(Buffer.concat(client.received).toString('latin1')).not.toContain('SIP/2.0');
      expect(await handshakeFailures('not-tls')).toBe(before + 1);
      await placeCall(`garbage-${bytes[0]}`);
      await settled();
    },
  );
});

describe('when a handshake stalls', () => {
  it('should close a connection that sent part of a ClientHello at the handshake deadline', async () => {
    const before = await handshakeFailures('timeout');
    const stalled = await openRaw(stack.port);
    stalled.socket.write(CLIENT_HELLO_START);
    // A peer that keeps the handshake alive a byte at a time gets the same deadline.
    const dribbler = await openRaw(stack.port);
    dribbler.socket.write(CLIENT_HELLO_START);
    const drip = setInterval(() => {
      if (!dribbler.socket.destroyed) dribbler.socket.write(Buffer.from([0x01]));
    }, HANDSHAKE_TIMEOUT_MS / 8);
    try {
      await vi.waitFor(() => expect(stack.driver.tlsConnectionCounts()?.handshaking).toBe(2));
      await placeCall('while-stalled');
      expect(stalled.closedAfterMs).toBeUndefined();
      const [stalledAfter, dribblerAfter] = await Promise.all([stalled.closed, dribbler.closed]);
      for (const after of [stalledAfter, dribblerAfter]) {
        expect(after).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 50);
        expect(after).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 1_500);
      }
    } finally {
      clearInterval(drip);
    }
    expect(await handshakeFailures('timeout')).toBe(before + 2);
    await settled();
  });
});

describe('when one source opens more connections than it may hold', () => {
  it('should refuse handshakes beyond maxHandshakesPerSource at once, and free the slots after', async () => {
    const before = await refusals('tls-handshakes-per-source');
    const resets = await handshakeFailures('reset');
    const clients: RawClient[] = [];
    for (let i = 0; i < MAX_HANDSHAKES + 2; i++) clients.push(await openRaw(stack.port));
    await vi.waitFor(() =>
      expect(clients.filter((client) => client.closedAfterMs !== undefined)).toHaveLength(2),
    );
    expect(stack.driver.tlsConnectionCounts()?.handshaking).toBe(MAX_HANDSHAKES);
    expect(await refusals('tls-handshakes-per-source')).toBe(before + 2);
    // A refusal is counted once, as a refusal: it never became a handshake that failed.
    expect(await handshakeFailures('reset')).toBe(resets);
    await placeCall('while-half-open');
    // The held ones reach their deadline; then the source may handshake again.
    await Promise.all(clients.map((client) => client.closed));
    await settled();
    const again = await openPeer(HOSTILE);
    again.close();
    await settled();
  });

  it('should refuse connections beyond maxConnectionsPerSource, and take one again once one closes', async () => {
    const before = await refusals('tls-connections-per-source');
    const resets = await handshakeFailures('reset');
    const peers: TlsSipPeer[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) peers.push(await openPeer(HOSTILE));
    await expect(openPeer(HOSTILE)).rejects.toThrow();
    expect(await refusals('tls-connections-per-source')).toBe(before + 1);
    expect(await handshakeFailures('reset')).toBe(resets);
    expect(stack.driver.tlsConnectionCounts()?.open).toBe(MAX_CONNECTIONS);
    await placeCall('while-full');
    peers.pop()?.close();
    await vi.waitFor(() =>
      expect(stack.driver.tlsConnectionCounts()?.open).toBe(MAX_CONNECTIONS - 1),
    );
    peers.push(await openPeer(HOSTILE));
    expect(await refusals('tls-connections-per-source')).toBe(before + 1);
    for (const peer of peers) peer.close();
    await settled();
  });
});

describe('when a SIP message over TLS is larger than maxMessageBytes', () => {
  const oversize = (peer: TlsSipPeer, callId: string): string =>
    peer.request('INVITE', { callId, body: `${OFFER}a=x:${'y'.repeat(MAX_MESSAGE_BYTES)}\r\n` });

  it('should drop it and close the connection, as over TCP, without an answer', async () => {
    const before = await drops('body-too-large');
    const peer = await openPeer(HOSTILE);
    const closed = new Promise<void>((resolve) => peer.socket.once('close', () => resolve()));
    const callId = `oversize-tls-${process.pid}`;
    peer.send(oversize(peer, callId));
    await closed;
    expect(peer.received).toEqual([]);
    expect(await drops('body-too-large')).toBe(before + 1);

    const tcp = await openRaw(stack.driver.port('tcp') ?? 0);
    tcp.socket.write(oversize(peer, `oversize-tcp-${process.pid}`));
    await tcp.closed;
    expect(tcp.received).toEqual([]);
    expect(await drops('body-too-large')).toBe(before + 2);
    await placeCall('after-oversize');
    await settled();
  });

  it('should drop a header block that never ends once it passes the limit', async () => {
    const before = await drops('header-too-large');
    const peer = await openPeer(HOSTILE);
    const closed = new Promise<void>((resolve) => peer.socket.once('close', () => resolve()));
    peer.send(`INVITE sip:100@127.0.0.1 SIP/2.0\r\nX-Filler: ${'z'.repeat(MAX_MESSAGE_BYTES)}`);
    await closed;
    expect(peer.received).toEqual([]);
    expect(await drops('header-too-large')).toBe(before + 1);
    await placeCall('after-long-header');
    await settled();
  });
});

describe('when the listener stops during a stalled handshake', () => {
  it('should close that connection at once instead of waiting for its deadline', async () => {
    const stopping = await startTlsDriver(pki, { tls: { handshakeTimeoutMs: 30_000 } });
    const stalled = await openRaw(stopping.port);
    stalled.socket.write(CLIENT_HELLO_START);
    await vi.waitFor(() => expect(stopping.driver.tlsConnectionCounts()?.handshaking).toBe(1));
    const startedAt = Date.now();
    await stopping.stop();
    expect(Date.now() - startedAt).toBeLessThan(2_000);
    expect(await stalled.closed).toBeLessThan(5_000);
  });
});

describe('when a TLS connection stays idle', () => {
  it('should close it after the idle timeout while calls on other connections go on', async () => {
    const idle = await startTlsDriver(pki, { sip: { tcpIdleTimeoutMs: IDLE_TIMEOUT_MS } });
    try {
      const peer = await TlsSipPeer.open(idle.port, { ca });
      opened.push(peer.socket);
      const openedAt = Date.now();
      const closed = new Promise<number>((resolve) =>
        peer.socket.once('close', () => resolve(Date.now() - openedAt)),
      );
      await vi.waitFor(() => expect(idle.driver.tlsConnectionCounts()?.open).toBe(1));
      const caller = await TlsSipPeer.open(idle.port, { ca });
      opened.push(caller.socket);
      const callId = `idle-other-${process.pid}`;
      caller.send(caller.request('INVITE', { callId, body: OFFER }));
      await caller.waitFor(callId, /^SIP\/2\.0 200 /);
      const after = await closed;
      expect(after).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 50);
      expect(after).toBeLessThan(IDLE_TIMEOUT_MS + 1_500);
      expect(peer.received).toEqual([]);
      caller.close();
      await vi.waitFor(() => expect(idle.driver.tlsConnectionCounts()?.open).toBe(0));
    } finally {
      await idle.stop();
    }
  });
});
