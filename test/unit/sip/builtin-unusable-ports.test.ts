/**
 * Ports no socket can send to, in what a peer sends the built-in stack over UDP on loopback. A
 * Via, Contact or Record-Route naming port 0 (or a port above 65535) is answered 400 with a reason
 * phrase naming the header, at the port the request came from; no dialog is built on it, so no BYE
 * is ever aimed at it. Before, dgram threw ERR_SOCKET_BAD_PORT: a BYE to such a Contact became an
 * unhandled rejection that ended the process, and a Via on port 0 left its transaction behind.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  confirmedCall,
  sdp,
  sleep,
  startBuiltin,
  statusLines,
  TIMEOUT_64_T1_MS,
  toTagOf,
  waitUntil,
  type BuiltinHarness,
} from './builtin-harness.ts';

let h: BuiltinHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const EMPTY = { dialogs: 0, serverTransactions: 0, clientTransactions: 0, pendingInvites: 0 };

describe('when an INVITE names port 0 where callgate would send to', () => {
  it.each([
    ['a Contact on port 0', { Contact: '<sip:alice@127.0.0.1:0>' }, 'Invalid Port 0 in Contact'],
    [
      'a Contact on a port above 65535',
      { Contact: '<sip:alice@127.0.0.1:70000>' },
      'Invalid Port in Contact',
    ],
    [
      'a Record-Route on port 0',
      { 'Record-Route': '<sip:proxy.example.com:0;lr>' },
      'Invalid Port 0 in Record-Route',
    ],
  ])('should answer %s with 400 and start no call', async (_name, headers, reason) => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `bad-target-${reason.length}-${Date.now()}`;
    // An INVITE without SDP: before, the 200 carried an offer and an ACK without answer made callgate BYE the Contact.
    const branch = `z9hG4bK-bad-target-${reason.length}`;
    harness.peer.send(harness.peer.request('INVITE', { callId, branch, headers }), harness.port);
    const rejected = await harness.peer.waitFor(callId, /^SIP\/2\.0 [2-6]\d\d /);
    expect(rejected.split('\r\n')[0]).toBe(`SIP/2.0 400 ${reason}`);
    // The ACK of a non-2xx is part of the INVITE transaction: same branch.
    harness.peer.send(
      harness.peer.request('ACK', { callId, branch, toTag: toTagOf(rejected) }),
      harness.port,
    );
    await sleep(50);
    expect(harness.calls).toHaveLength(0);
    expect(harness.peer.messages(callId).filter((text) => text.startsWith('BYE'))).toEqual([]);
    // Timer I (T4) after the ACK, well before Timer H.
    await waitUntil(() => harness.driver.retainedState().serverTransactions === 0, 300);
    expect(harness.driver.retainedState()).toEqual(EMPTY);
  });

  it('should refuse a re-INVITE whose Contact moves the target to port 0, and keep sending to the old one', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `bad-refresh-${Date.now()}`;
    const { toTag } = await confirmedCall(harness, callId);
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 2,
        headers: { Contact: '<sip:alice@127.0.0.1:0>', 'Content-Type': 'application/sdp' },
        body: sdp(4002),
      }),
      harness.port,
    );
    const refused = await harness.peer.waitFor(callId, /^SIP\/2\.0 400 [\s\S]*CSeq: 2 INVITE/);
    expect(refused.split('\r\n')[0]).toBe('SIP/2.0 400 Invalid Port 0 in Contact');
    await harness.calls[0]?.dialog.hangup();
    // The BYE reaches the peer at the Contact of the INVITE, not port 0.
    await harness.peer.waitFor(callId, /^BYE /);
  });
});

describe('when a request has a Via on port 0 and no rport', () => {
  it('should answer each one 400 at the port it came from and keep no transaction after Timer J', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callIds: string[] = [];
    for (let i = 0; i < 20; i++) {
      const callId = `via-port0-${i}-${Date.now()}`;
      callIds.push(callId);
      harness.peer.send(
        harness.peer.request('OPTIONS', {
          callId,
          headers: { Via: `SIP/2.0/UDP 10.9.9.9:0;branch=z9hG4bK-port0-${i}` },
        }),
        harness.port,
      );
    }
    for (const callId of callIds) await harness.peer.waitFor(callId, /^SIP\/2\.0 /);
    expect(
      callIds.map((callId) => statusLines(harness.peer.messages(callId), 'OPTIONS')[0]),
    ).toEqual(callIds.map(() => 'SIP/2.0 400 Invalid Port 0 in Via'));
    // Before, the first send threw before Timer J was armed and every transaction stayed forever.
    await sleep(TIMEOUT_64_T1_MS + 200);
    expect(harness.driver.retainedState()).toEqual(EMPTY);
  });

  it('should still answer a retransmission of it from the transaction, once per copy', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `via-port0-retx-${Date.now()}`;
    const request = harness.peer.request('OPTIONS', {
      callId,
      headers: { Via: 'SIP/2.0/UDP 10.9.9.9:0;branch=z9hG4bK-port0-retx' },
    });
    harness.peer.send(request, harness.port);
    await harness.peer.waitFor(callId, /^SIP\/2\.0 400 /);
    harness.peer.send(request, harness.port);
    await waitUntil(() => harness.peer.messages(callId).length === 2);
    expect(statusLines(harness.peer.messages(callId), 'OPTIONS')).toEqual([
      'SIP/2.0 400 Invalid Port 0 in Via',
      'SIP/2.0 400 Invalid Port 0 in Via',
    ]);
  });
});

describe('when a request comes from source port 0 (a forged datagram) and asks for rport', () => {
  it('should send nothing, keep no transaction and not throw', async () => {
    const harness = await startBuiltin();
    h = harness;
    const text = harness.peer.request('OPTIONS', {
      callId: `src-port0-${Date.now()}`,
      headers: { Via: 'SIP/2.0/UDP 127.0.0.1:5060;rport;branch=z9hG4bK-src0' },
    });
    // No socket can send from port 0: the driver is handed the datagram as the transport would.
    harness.driver.receive(Buffer.from(text), { transport: 'udp', address: '127.0.0.1', port: 0 });
    const invite = harness.peer.request('INVITE', {
      callId: `src-port0-inv-${Date.now()}`,
      headers: { Via: 'SIP/2.0/UDP 127.0.0.1:5060;rport;branch=z9hG4bK-src0i' },
    });
    harness.driver.receive(Buffer.from(invite), {
      transport: 'udp',
      address: '127.0.0.1',
      port: 0,
    });
    await sleep(20);
    expect(harness.driver.retainedState()).toEqual(EMPTY);
    expect(harness.calls).toHaveLength(0);
    expect(
      harness.logs.some(
        (line) => line.includes('the transport refused it') && line.includes('unusable port 0'),
      ),
    ).toBe(true);
  });
});

describe('when a re-INVITE of a confirmed call comes from source port 0 and asks for rport', () => {
  it('should end the call with BYE to the Contact, since its 200 can never be sent, and keep nothing', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `src-port0-reinvite-${Date.now()}`;
    const { toTag } = await confirmedCall(harness, callId);
    const reinvite = harness.peer.request('INVITE', {
      callId,
      toTag,
      cseq: 2,
      headers: {
        Via: 'SIP/2.0/UDP 127.0.0.1:5060;rport;branch=z9hG4bK-src0r',
        'Content-Type': 'application/sdp',
      },
      body: sdp(4002),
    });
    harness.driver.receive(Buffer.from(reinvite), {
      transport: 'udp',
      address: '127.0.0.1',
      port: 0,
    });
    // Before, the refused 200 threw out of the dialog, which then waited for its ACK forever.
    const bye = await harness.peer.waitFor(callId, /^BYE /);
    expect(harness.events.get(callId)?.at(-1)).toEqual({ type: 'ended', reason: 'ack-timeout' });
    harness.peer.send(
      `SIP/2.0 200 OK\r\n${bye
        .split('\r\n')
        .filter((line) => /^(Via|From|To|Call-ID|CSeq):/.test(line))
        .join('\r\n')}\r\nContent-Length: 0\r\n\r\n`,
      harness.port,
    );
    await waitUntil(
      () =>
        harness.driver.retainedState().clientTransactions === 0 &&
        harness.driver.retainedState().serverTransactions === 0,
      1000,
    );
    expect(harness.driver.retainedState()).toEqual(EMPTY);
  });
});

describe('when the application pings a target on port 0', () => {
  it('should answer 503 at once without sending and keep no client transaction', async () => {
    const harness = await startBuiltin();
    h = harness;
    // Before, dgram threw out of ping() and its client transaction stayed in the map forever.
    await expect(harness.driver.ping('sip:trunk@127.0.0.1:0')).resolves.toBe(503);
    expect(harness.driver.retainedState()).toEqual(EMPTY);
  });
});
