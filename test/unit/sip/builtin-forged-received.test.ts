/**
 * A `received` parameter the peer wrote in its own Via, over UDP on loopback. RFC 3261 section
 * 18.2.1: `received` is the server's note of the address a request really came from, so callgate
 * writes its own and never keeps one it was sent. Before, a Via whose host matched the source kept
 * the forged value, and every response and retransmission went to the address it named: a
 * reflector aimed at a third party.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { sleep, startBuiltin, TIMEOUT_64_T1_MS, type BuiltinHarness } from './builtin-harness.ts';

let h: BuiltinHarness | undefined;
let victim: Socket | undefined;
afterEach(async () => {
  victim?.close();
  victim = undefined;
  await h?.stop();
  h = undefined;
});

/** A socket on 127.0.0.2 at the peer's port: what a forged `received=127.0.0.2` would aim at. */
async function openVictim(port: number): Promise<string[]> {
  const got: string[] = [];
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(port, '127.0.0.2', resolve));
  socket.on('message', (data) => got.push(data.toString()));
  victim = socket;
  return got;
}

describe('when a request carries a received parameter of the peer own making', () => {
  it.each([
    [
      'its Via host is the real source',
      (port: number) => `SIP/2.0/UDP 127.0.0.1:${port};branch=z9hG4bK-forged-a;received=127.0.0.2`,
    ],
    [
      'its Via host is another address',
      (port: number) => `SIP/2.0/UDP 192.0.2.7:${port};branch=z9hG4bK-forged-b;received=127.0.0.2`,
    ],
    [
      'it also asks for rport',
      (port: number) =>
        `SIP/2.0/UDP 127.0.0.1:${port};rport;branch=z9hG4bK-forged-c;received=127.0.0.2`,
    ],
  ])(
    'should send the response and its retransmissions to the real source when %s',
    async (_name, via) => {
      const harness = await startBuiltin();
      h = harness;
      const atVictim = await openVictim(harness.peer.port);
      const callId = `forged-${Date.now()}-${Math.random()}`;
      // An INVITE to a number no tenant has: a 404 that is retransmitted (Timer G) until an ACK that never comes.
      harness.peer.send(
        harness.peer.request('INVITE', {
          callId,
          uri: 'sip:999@127.0.0.1',
          headers: { Via: via(harness.peer.port) },
        }),
        harness.port,
      );
      const notFound = await harness.peer.waitFor(callId, /^SIP\/2\.0 404 /);
      expect(notFound).not.toContain('received=127.0.0.2');
      await sleep(TIMEOUT_64_T1_MS / 4);
      expect(
        harness.peer.messages(callId).filter((text) => text.startsWith('SIP/2.0 404')).length,
      ).toBeGreaterThan(1);
      expect(atVictim).toEqual([]);
    },
  );

  it('should answer a malformed request at the real source too', async () => {
    const harness = await startBuiltin();
    h = harness;
    const atVictim = await openVictim(harness.peer.port);
    const callId = `forged-400-${Date.now()}`;
    // CSeq names another method: refused by the parser and answered 400 from its half-parsed headers.
    const text = harness.peer.request('OPTIONS', {
      callId,
      headers: {
        Via: `SIP/2.0/UDP 127.0.0.1:${harness.peer.port};branch=z9hG4bK-forged-d;received=127.0.0.2`,
        CSeq: '1 BYE',
      },
    });
    harness.peer.send(text, harness.port);
    await harness.peer.waitFor(callId, /^SIP\/2\.0 400 /);
    await sleep(50);
    expect(atVictim).toEqual([]);
  });
});

describe('when the Via host differs from the source', () => {
  it('should note the source in received and answer there', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `nat-${Date.now()}`;
    harness.peer.send(
      harness.peer.request('OPTIONS', {
        callId,
        headers: { Via: `SIP/2.0/UDP 192.0.2.7:${harness.peer.port};branch=z9hG4bK-nat` },
      }),
      harness.port,
    );
    const ok = await harness.peer.waitFor(callId, /^SIP\/2\.0 200 /);
    expect(ok).toContain(
      `\r\nVia: SIP/2.0/UDP 192.0.2.7:${harness.peer.port};branch=z9hG4bK-nat;received=127.0.0.1\r\n`,
    );
  });
});
