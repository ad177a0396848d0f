/**
 * A re-INVITE's media sources, over real UDP on loopback: the built-in stack takes a re-INVITE
 * that moves the caller's media to another address and port (127.0.0.2) and reports where the
 * re-INVITE came from; the call's RtpSession, given both as the call session gives them
 * (gateway/call/call-session.ts, applyMedia), follows RTP from the new address and from the
 * re-INVITE's source, and refuses RTP from an address named by neither (127.0.0.3), counting it
 * as refused-source and sending it nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { registry } from '../../../config/metrics.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import type { RtpSessionEvent } from '../../../gateway/media/rtp-session-events.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import type { DialogEvent } from '../../../gateway/sip/signaling-driver.ts';
import { UdpSipPeer } from '../../unit/sip/udp-sip-peer.ts';
import { RtpSessionHarness, audioEvents, stream } from './rtp-session-harness.ts';
import { waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(0);
const CALLER = '127.0.0.1';
/** Where the re-INVITE moves the caller's media (its new c=). */
const MOVED = '127.0.0.2';
/** Named by nothing: not the SDP, not the INVITE's nor the re-INVITE's source, no tenant range. */
const STRANGER = '127.0.0.3';
/** Where the re-INVITE comes from (another proxy of the caller's carrier, a NAT rebinding). */
const REINVITE_SOURCE = '127.0.0.4';
const CALLER_SSRC = 0xca11;
const STRANGER_BYTE = 0xee;

let driver: BuiltinSignalingDriver | undefined;
const sipPeers: UdpSipPeer[] = [];
afterEach(async () => {
  for (const peer of sipPeers.splice(0)) peer.close();
  await driver?.stop();
  driver = undefined;
  await harness.closeAll();
});

const sdp = (address: string, port: number): string =>
  `v=0\r\no=- 1 1 IN IP4 ${address}\r\ns=-\r\nc=IN IP4 ${address}\r\nt=0 0\r\nm=audio ${port} RTP/AVP 0\r\n`;

function latches(events: readonly RtpSessionEvent[]): string[] {
  return events.flatMap((e) =>
    e.type === 'remote-latched' ? [`${e.remote.address}:${e.remote.port}`] : [],
  );
}

async function refusedSourceDrops(): Promise<number> {
  const metric = await registry.getSingleMetric('callgate_rtp_dropped_packets_total')?.get();
  return metric?.values.find((v) => v.labels.reason === 'refused-source')?.value ?? 0;
}

async function sipPeer(address: string): Promise<UdpSipPeer> {
  const peer = await UdpSipPeer.open(address);
  sipPeers.push(peer);
  return peer;
}

/**
 * A call answered by the built-in stack, its media on an RtpSession that names the INVITE's source
 * as the call session does; re-INVITEs from `REINVITE_SOURCE` are applied to it as the call
 * session applies them. Resolves with the re-INVITE sender once the call is confirmed.
 */
async function answeredCall() {
  const { session, peer, events } = await harness.start({ sources: { signaling: CALLER } });
  const dialogEvents: DialogEvent[] = [];
  driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'] }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8'] },
      }),
    ],
    logger: new Logger({ level: 'error', sink: { write: () => undefined } }),
    timers: { t1Ms: 5, t2Ms: 20, t4Ms: 25 },
  });
  driver.onCall((call) => {
    call.dialog.on((event) => {
      dialogEvents.push(event);
      if (event.type === 'reinvite') session.setRemote(event.media.remote, event.source);
    });
    call.accept({ local: { address: session.localAddress, port: session.localPort } });
  });
  await driver.start();
  const sipPort = driver.port('udp') ?? 0;
  const caller = await sipPeer(CALLER);
  const callId = `reinvite-source-${Date.now()}`;
  caller.send(
    caller.request('INVITE', {
      callId,
      headers: { 'Content-Type': 'application/sdp' },
      body: sdp(CALLER, peer.port),
    }),
    sipPort,
  );
  const ok = await caller.waitFor(callId, /^SIP\/2\.0 200 /);
  const toTag = /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(ok)?.[1] ?? '';
  caller.send(caller.request('ACK', { callId, toTag }), sipPort);
  await waitFor(() => dialogEvents.some((e) => e.type === 'ack'));
  const proxy = await sipPeer(REINVITE_SOURCE);
  /** `via`: the Via the re-INVITE carries (a phone behind NAT writes its LAN address there). */
  const reinvite = async (address: string, port: number, via?: string): Promise<void> => {
    proxy.send(
      proxy.request('INVITE', {
        callId,
        toTag,
        cseq: 2,
        headers: {
          'Content-Type': 'application/sdp',
          ...(via !== undefined && { Via: via }),
        },
        body: sdp(address, port),
      }),
      sipPort,
    );
    await proxy.waitFor(callId, /^SIP\/2\.0 200 [\s\S]*CSeq: 2 INVITE/);
    proxy.send(proxy.request('ACK', { callId, toTag, cseq: 2 }), sipPort);
    await waitFor(() => dialogEvents.some((e) => e.type === 'reinvite'));
  };
  return { session, peer, events, dialogEvents, reinvite };
}

describe('when a re-INVITE moves the caller’s media to another address and port', () => {
  it('should follow RTP from the new address, and refuse and count RTP from an address named by neither', async () => {
    const moved = await harness.peer(MOVED);
    const stranger = await harness.peer(STRANGER);
    const { session, peer, events, dialogEvents, reinvite } = await answeredCall();
    await stream(peer, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 1, firstByte: 0 });
    await waitFor(() => latches(events).length === 1);

    await reinvite(MOVED, moved.port);
    expect(dialogEvents.find((e) => e.type === 'reinvite')).toMatchObject({
      media: { remote: { address: MOVED, port: moved.port } },
      source: REINVITE_SOURCE,
    });
    const refusedBefore = await refusedSourceDrops();
    await stream(stranger, session.localPort, 10, {
      ssrc: 0xbad,
      firstSeq: 500,
      firstByte: STRANGER_BYTE,
    });
    await stream(moved, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 6, firstByte: 5 });
    session.play('answer', Buffer.alloc(160 * 10, 0x33));
    await waitFor(() => moved.packets().length >= 8);

    expect(latches(events)).toEqual([`${CALLER}:${peer.port}`, `${MOVED}:${moved.port}`]);
    expect(session.remoteEndpoint).toEqual({ address: MOVED, port: moved.port });
    expect(stranger.received).toHaveLength(0);
    expect(audioEvents(events).some((b) => b[0] === STRANGER_BYTE)).toBe(false);
    expect(session.stats().dropped['refused-source']).toBe(10);
    // The session's counts reach callgate_rtp_dropped_packets_total when it closes.
    await session.close();
    expect((await refusedSourceDrops()) - refusedBefore).toBe(10);
  });
});

describe('when the media after a re-INVITE comes from where the re-INVITE came from', () => {
  it('should follow it there, as it follows the INVITE’s source, and still refuse a stranger', async () => {
    // The re-INVITE's c= is an address nothing sends from (a phone's LAN address behind NAT).
    const fromSource = await harness.peer(REINVITE_SOURCE);
    const stranger = await harness.peer(STRANGER);
    const { session, peer, events, dialogEvents, reinvite } = await answeredCall();
    await stream(peer, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 1, firstByte: 0 });
    await waitFor(() => latches(events).length === 1);

    // Its Via names the LAN address too: the source is where the datagram came from (received=).
    await reinvite(MOVED, 40_002, 'SIP/2.0/UDP 10.0.0.5:5060;branch=z9hG4bK-lan-2;rport');
    expect(dialogEvents.find((e) => e.type === 'reinvite')).toMatchObject({
      source: REINVITE_SOURCE,
    });
    await stream(stranger, session.localPort, 10, {
      ssrc: 0xbad,
      firstSeq: 500,
      firstByte: STRANGER_BYTE,
    });
    await stream(fromSource, session.localPort, 5, {
      ssrc: CALLER_SSRC,
      firstSeq: 6,
      firstByte: 5,
    });
    session.play('answer', Buffer.alloc(160 * 10, 0x44));
    await waitFor(() => fromSource.packets().length >= 8);

    expect(latches(events)).toEqual([
      `${CALLER}:${peer.port}`,
      `${REINVITE_SOURCE}:${fromSource.port}`,
    ]);
    expect(stranger.received).toHaveLength(0);
    expect(audioEvents(events).some((b) => b[0] === STRANGER_BYTE)).toBe(false);
    expect(session.stats().dropped['refused-source']).toBe(10);
  });
});
