/**
 * A re-INVITE without SDP on the built-in stack, over UDP on loopback: callgate's 200 carries an
 * offer (its current session, a new o= version) and the ACK must carry the answer, which updates
 * the media; a missing answer ends the call with BYE and a Reason header.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import type { DialogEvent } from '../../../gateway/sip/signaling-driver.ts';
import { UdpSipPeer } from './udp-sip-peer.ts';

let driver: BuiltinSignalingDriver | undefined;
let peer: UdpSipPeer | undefined;
afterEach(async () => {
  peer?.close();
  await driver?.stop();
  driver = undefined;
  peer = undefined;
});

const sdp = (port: number): string =>
  `v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio ${port} RTP/AVP 0\r\n`;

async function confirmedCall(): Promise<{
  port: number;
  caller: UdpSipPeer;
  callId: string;
  toTag: string;
  events: DialogEvent[];
}> {
  const events: DialogEvent[] = [];
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
    logger: new Logger({ level: 'error', sink: { write: () => undefined } }),
    // The caller never answers the BYE of stop(): a short T1 keeps its wait (64*T1) short.
    timers: { t1Ms: 5, t2Ms: 20, t4Ms: 25 },
  });
  driver.onCall((call) => {
    call.dialog.on((event) => events.push(event));
    call.accept({ local: { address: '127.0.0.1', port: 40_000 } });
  });
  await driver.start();
  const port = driver.port('udp') ?? 0;
  const caller = await UdpSipPeer.open();
  peer = caller;
  const callId = `reinvite-${Date.now()}`;
  caller.send(
    caller.request('INVITE', {
      callId,
      headers: { 'Content-Type': 'application/sdp' },
      body: sdp(4000),
    }),
    port,
  );
  const ok = await caller.waitFor(callId, /^SIP\/2\.0 200 /);
  const toTag = /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(ok)?.[1] ?? '';
  caller.send(caller.request('ACK', { callId, toTag }), port);
  await waitUntil(() => events.some((event) => event.type === 'ack'));
  return { port, caller, callId, toTag, events };
}

async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('when the caller sends a re-INVITE without SDP', () => {
  it('should offer in the 200 and take the answer from the ACK as the new media', async () => {
    const { port, caller, callId, toTag, events } = await confirmedCall();
    caller.send(caller.request('INVITE', { callId, toTag, cseq: 2 }), port);
    const offer = await caller.waitFor(callId, /^SIP\/2\.0 200 [\s\S]*CSeq: 2 INVITE/);
    expect(offer).toMatch(/\r\no=callgate \d+ 2 IN IP4 127\.0\.0\.1\r\n/);
    expect(offer).toMatch(/\r\nm=audio 40000 RTP\/AVP 0/);
    caller.send(
      caller.request('ACK', {
        callId,
        toTag,
        cseq: 2,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4100),
      }),
      port,
    );
    await waitUntil(() => events.some((event) => event.type === 'reinvite'));
    expect(events.map((event) => event.type)).toEqual(['ack', 'reinvite']);
    expect(events[1]).toMatchObject({
      type: 'reinvite',
      media: { codec: 'PCMU', remote: { address: '127.0.0.1', port: 4100 } },
    });
    expect(caller.messages(callId).filter((text) => text.startsWith('BYE'))).toEqual([]);
  });

  it('should end the call with BYE and a Reason header when that ACK carries no answer', async () => {
    const { port, caller, callId, toTag, events } = await confirmedCall();
    caller.send(caller.request('INVITE', { callId, toTag, cseq: 2 }), port);
    await caller.waitFor(callId, /^SIP\/2\.0 200 [\s\S]*CSeq: 2 INVITE/);
    caller.send(caller.request('ACK', { callId, toTag, cseq: 2 }), port);
    const bye = await caller.waitFor(callId, /^BYE /);
    expect(bye).toMatch(/\r\nReason: SIP ;cause=488 ;text="the ACK carried no SDP answer"\r\n/);
    expect(events.map((event) => event.type)).toEqual(['ack', 'ended']);
    expect(events[1]).toEqual({ type: 'ended', reason: 'local-bye' });
  });
});
