import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import type { RtpConfig } from '../../../config/schema.ts';
import { Logger } from '../../../config/log.ts';
import { PCMU } from '../../../gateway/media/audio-format.ts';
import { MonotonicMediaTimer } from '../../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import { parseRtcpCompound, serializeRtcpReport } from '../../../gateway/media/rtcp-packet.ts';
import { serializeRtpPacket } from '../../../gateway/media/rtp-packet.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { RtpSession, type RtpSessionOptions } from '../../../gateway/media/rtp-session.ts';
import type { RtpSessionEvent } from '../../../gateway/media/rtp-session-events.ts';
import {
  parseTelephoneEvent,
  serializeTelephoneEvent,
  type DtmfDigit,
} from '../../../gateway/media/telephone-event.ts';
import { RtpPeer, sleep, waitFor } from './rtp-peer.ts';

/** A port range per test file run, away from the default range other processes may use. */
const PORT_BASE = 42000 + 2 * ((process.pid * 37) % 3000);
const TELEPHONE_EVENT = 101;
const quietLogger = new Logger({ level: 'error', sink: { write: () => {} } });

function config(overrides: Partial<RtpConfig> = {}): RtpConfig {
  return {
    listen: '127.0.0.1',
    portMin: PORT_BASE,
    portMax: PORT_BASE + 39,
    mediaTimeoutMs: 5000,
    comfortSilence: false,
    stallCutMs: 2000,
    jitterMinMs: 20,
    jitterMaxMs: 200,
    sockets: 'auto',
    ...overrides,
  };
}

interface Harness {
  session: RtpSession;
  peer: RtpPeer;
  events: RtpSessionEvent[];
}

const timer = new MonotonicMediaTimer();
let scheduler: PlayoutScheduler;
let ports: RtpPortAllocator;
const open: Array<{ close(): Promise<void> }> = [];

beforeEach(() => {
  scheduler = new PlayoutScheduler({ timer });
  ports = new RtpPortAllocator({ portMin: PORT_BASE, portMax: PORT_BASE + 39 });
});

afterEach(async () => {
  for (const item of open.splice(0)) await item.close();
});

async function start(
  options: Partial<RtpSessionOptions> = {},
  rtp: Partial<RtpConfig> = {},
): Promise<Harness> {
  const peer = await RtpPeer.open();
  open.push(peer);
  const session = await RtpSession.open({
    config: config(rtp),
    ports,
    scheduler,
    timer,
    codec: PCMU,
    telephoneEventPayloadType: TELEPHONE_EVENT,
    model: { encoding: 'pcmu' },
    remote: { address: '127.0.0.1', port: peer.port },
    logger: quietLogger,
    ...options,
  });
  open.push(session);
  const events: RtpSessionEvent[] = [];
  session.on((event) => events.push(event));
  return { session, peer, events };
}

function audioPayload(n: number): Buffer {
  return Buffer.alloc(160, n & 0xff);
}

/** Sends `count` PCMU packets paced at 20 ms, as a caller's phone would. */
async function speak(
  peer: RtpPeer,
  port: number,
  count: number,
  options: { ssrc?: number; firstSeq?: number } = {},
): Promise<void> {
  for (let i = 0; i < count; i++) {
    peer.send(
      {
        payloadType: 0,
        marker: i === 0,
        sequenceNumber: (options.firstSeq ?? 1000) + i,
        timestamp: 5000 + 160 * i,
        ssrc: options.ssrc ?? 0xcafe,
        payload: audioPayload(i),
      },
      port,
    );
    await sleep(20);
  }
}

function audioEvents(events: RtpSessionEvent[]): Buffer[] {
  return events.flatMap((e) => (e.type === 'audio' && !e.concealed ? [e.audio] : []));
}

describe('when a caller sends PCMU to a PCMU model', () => {
  // Real-time assertions on a 2-core machine shared with other test runs: retried, not loosened to nothing.
  it(
    'should deliver every payload byte for byte, in order, and send model audio back paced with continuous timestamps',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await start();
      expect(session.localPort % 2).toBe(0);
      await speak(peer, session.localPort, 25);
      await waitFor(() => audioEvents(events).length >= 25);
      const heard = audioEvents(events);
      expect(heard.map((b) => b[0])).toEqual(Array.from({ length: 25 }, (_, i) => i));
      expect(heard.every((b, i) => b.equals(audioPayload(i)))).toBe(true);

      session.play('item_1', Buffer.concat(heard));
      session.endItem('item_1');
      await waitFor(() => events.some((e) => e.type === 'item-played'));
      await sleep(30);
      const out = peer.packets();
      expect(out).toHaveLength(25);
      expect(out.every((p) => p.payloadType === 0 && p.ssrc === session.ssrc)).toBe(true);
      expect(out.map((p) => p.payload[0])).toEqual(Array.from({ length: 25 }, (_, i) => i));
      expect(out.map((p) => p.marker)).toEqual([true, ...Array.from({ length: 24 }, () => false)]);
      for (let i = 1; i < out.length; i++) {
        expect(
          ((out[i]?.sequenceNumber ?? 0) - (out[i - 1]?.sequenceNumber ?? 0) + 65536) % 65536,
        ).toBe(1);
        expect(((out[i]?.timestamp ?? 0) - (out[i - 1]?.timestamp ?? 0)) >>> 0).toBe(160);
      }
      const spacing = peer.received.slice(1).map((r, i) => r.atMs - (peer.received[i]?.atMs ?? 0));
      const total = (peer.received.at(-1)?.atMs ?? 0) - (peer.received[0]?.atMs ?? 0);
      expect(Math.abs(total - 24 * 20)).toBeLessThan(20);
      expect(spacing.filter((s) => Math.abs(s - 20) > 5).length).toBeLessThanOrEqual(3);
      expect(events.find((e) => e.type === 'item-played')).toEqual({
        type: 'item-played',
        itemId: 'item_1',
        sentMs: 500,
      });
      expect(session.stats()).toMatchObject({ packetsIn: 25, packetsOut: 25, lost: 0 });
    },
  );

  it(
    'should stop sending at once on clear() and report the milliseconds the caller was sent',
    { retry: 2 },
    async () => {
      const { session, peer } = await start();
      session.play('item_long', Buffer.alloc(160 * 100, 0x55));
      await sleep(330);
      const cleared = session.clear();
      const sentBefore = peer.packets().length;
      await sleep(120);
      const sentAfter = peer.packets().length;
      expect(cleared?.itemId).toBe('item_long');
      // Packets in flight at the moment of the clear may still land; nothing is sent after it.
      expect(sentAfter - sentBefore).toBeLessThanOrEqual(1);
      expect(cleared?.sentMs).toBe(sentAfter * 20);
      expect((cleared?.sentMs ?? 0) + (cleared?.droppedMs ?? 0)).toBe(2000);
      expect(cleared?.sentMs).toBeGreaterThanOrEqual(240);
      expect(cleared?.sentMs).toBeLessThanOrEqual(380);
    },
  );
});

describe('when audio of a cleared item keeps arriving', () => {
  it('should not play late deltas of the interrupted item but play the next item', async () => {
    const { session, peer } = await start();
    session.play('item_old', Buffer.alloc(160 * 50, 0x11));
    await waitFor(() => peer.packets().length >= 3);
    const cleared = session.clear();
    expect(cleared?.itemId).toBe('item_old');
    // The model had not seen the cancel yet: its last deltas for the old item arrive now.
    session.play('item_old', Buffer.alloc(160 * 5, 0x11));
    session.play('item_new', Buffer.alloc(160 * 2, 0x22));
    await waitFor(() => peer.packets().some((p) => p.payload[0] === 0x22));
    await sleep(60);
    const after = peer.packets().slice((cleared?.sentMs ?? 0) / 20);
    expect(after.map((p) => p.payload[0])).toEqual([0x22, 0x22]);
  });
});

describe('when the model speaks in talk spurts', () => {
  it(
    'should send nothing between spurts, keep the timestamp clock running and mark each spurt start',
    { retry: 2 },
    async () => {
      const { session, peer } = await start();
      session.play('item_a', Buffer.alloc(160 * 3, 0x11));
      session.endItem('item_a');
      await waitFor(() => peer.packets().length >= 3);
      await sleep(100);
      expect(peer.packets()).toHaveLength(3);
      session.play('item_b', Buffer.alloc(160 * 2, 0x22));
      await waitFor(() => peer.packets().length >= 5);
      const out = peer.packets();
      expect(out.map((p) => p.marker)).toEqual([true, false, false, true, false]);
      expect(out.map((p) => p.payload[0])).toEqual([0x11, 0x11, 0x11, 0x22, 0x22]);
      // Sequence numbers have no gap; the timestamp jumped by the silent time (whole frames).
      expect(((out[3]?.sequenceNumber ?? 0) - (out[2]?.sequenceNumber ?? 0)) & 0xffff).toBe(1);
      const jump = ((out[3]?.timestamp ?? 0) - (out[2]?.timestamp ?? 0)) >>> 0;
      expect(jump % 160).toBe(0);
      expect(jump).toBeGreaterThanOrEqual(160 * 5);
    },
  );

  it('should fill the gaps with comfort silence when configured', { retry: 2 }, async () => {
    const { session, peer } = await start({}, { comfortSilence: true });
    await sleep(80);
    session.play('item_a', Buffer.alloc(160 * 2, 0x11));
    await waitFor(() => peer.packets().filter((p) => p.payload[0] === 0x11).length >= 2);
    await sleep(60);
    const out = peer.packets();
    const firstAudio = out.findIndex((p) => p.payload[0] === 0x11);
    expect(firstAudio).toBeGreaterThanOrEqual(2);
    expect(
      out.slice(0, firstAudio).every((p) => p.payload.equals(Buffer.alloc(160, 0xff)) && !p.marker),
    ).toBe(true);
    expect(out[firstAudio]?.marker).toBe(true);
    expect(out.slice(firstAudio + 2).every((p) => p.payload[0] === 0xff)).toBe(true);
    for (let i = 1; i < out.length; i++)
      expect(((out[i]?.timestamp ?? 0) - (out[i - 1]?.timestamp ?? 0)) >>> 0).toBe(160);
  });
});

// The socket edge on both RTP socket engines (rtp.sockets): the native module and Node's dgram.
describe.each(['native', 'node'] as const)('on %s RTP sockets', (sockets) => {
  describe('when the caller is behind NAT (symmetric RTP)', () => {
    it('should latch to the source of the first valid packet and ignore a stray sender', async () => {
      const { session, peer, events } = await start(
        { remote: { address: '127.0.0.1', port: 9 } },
        { sockets },
      );
      const stray = await RtpPeer.open();
      open.push(stray);
      await speak(peer, session.localPort, 3);
      await waitFor(() => events.some((e) => e.type === 'remote-latched'));
      for (let i = 0; i < 5; i++)
        stray.send(
          {
            payloadType: 0,
            sequenceNumber: i,
            timestamp: i * 160,
            ssrc: 0xbad,
            payload: audioPayload(99),
          },
          session.localPort,
        );
      await sleep(60);
      session.play('item', Buffer.alloc(160 * 3, 0x11));
      await waitFor(() => peer.packets().length >= 3);
      expect(session.remoteEndpoint).toEqual({ address: '127.0.0.1', port: peer.port });
      expect(stray.packets()).toHaveLength(0);
      expect(session.stats().dropped['unexpected-source']).toBe(5);
      expect(audioEvents(events).some((b) => b[0] === 99)).toBe(false);
    });

    // Moving the latch (new SSRC, NAT rebinding, hostile senders): rtp-session-latching.test.ts.
  });

  describe('when hostile or broken packets arrive', () => {
    it('should drop and count each kind and keep the call working', async () => {
      const { session, peer, events } = await start({}, { sockets });
      const port = session.localPort;
      await speak(peer, port, 3);
      const valid = (seq: number) =>
        serializeRtpPacket({
          payloadType: 0,
          sequenceNumber: seq,
          timestamp: seq * 160,
          ssrc: 0xcafe,
          payload: audioPayload(seq),
        });
      peer.sendRaw(Buffer.from('8000', 'hex'), port);
      const wrongVersion = valid(1003);
      wrongVersion[0] = 0x40;
      peer.sendRaw(wrongVersion, port);
      peer.send(
        {
          payloadType: 96,
          sequenceNumber: 1003,
          timestamp: 1,
          ssrc: 0xcafe,
          payload: audioPayload(1),
        },
        port,
      );
      peer.sendRaw(Buffer.alloc(4000, 0x80), port);
      peer.sendRaw(Buffer.alloc(0), port);
      peer.send(
        {
          payloadType: 0,
          sequenceNumber: 50000,
          timestamp: 123,
          ssrc: 0xcafe,
          payload: audioPayload(7),
        },
        port,
      );
      peer.sendRaw(Buffer.from('a0000001000000000000cafeff40', 'hex'), port);
      await sleep(50);
      await speak(peer, port, 5, { firstSeq: 1003 });
      await waitFor(() => audioEvents(events).length >= 8);
      const dropped = session.stats().dropped;
      expect(dropped).toMatchObject({
        truncated: 2,
        'bad-version': 1,
        'unknown-payload-type': 1,
        'too-large': 1,
        'sequence-jump': 1,
        'bad-padding': 1,
      });
      // Every datagram's whole length, the 4,000-byte one included: 8 valid packets of 172 bytes,
      // then 2 + 172 + 172 + 4000 + 0 + 172 + 14 bytes of the others.
      expect(session.stats().bytesIn).toBe(8 * 172 + 2 + 172 + 172 + 4000 + 0 + 172 + 14);
      expect(audioEvents(events).map((b) => b[0])).toEqual([0, 1, 2, 0, 1, 2, 3, 4]);
    });

    it('should survive a flood of random datagrams and still carry audio', async () => {
      const { session, peer, events } = await start({}, { sockets });
      let seed = 42;
      const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
      for (let i = 0; i < 2000; i++) {
        const data = Buffer.from(Array.from({ length: next() * 2 }, next));
        if (i % 3 === 0 && data.length >= 2) data[0] = 0x80;
        peer.sendRaw(data, session.localPort);
        // Paced in bursts of 50, so the kernel's socket buffer (not the session) sees them all.
        if (i % 50 === 49) await sleep(2);
      }
      await sleep(100);
      await speak(peer, session.localPort, 5, { ssrc: 0xcafe });
      await sleep(100);
      const stats = session.stats();
      const dropped = Object.values(stats.dropped).reduce((a, b) => a + (b ?? 0), 0);
      expect(stats.packetsIn).toBeGreaterThan(1500);
      // Every datagram was either used or counted; the session is still alive and ticking.
      expect(dropped).toBeGreaterThan(0);
      session.play('item', Buffer.alloc(320, 0x22));
      await waitFor(() => peer.packets().some((p) => p.ssrc === session.ssrc));
      expect(events.some((e) => e.type === 'closed')).toBe(false);
    });
  });
});

describe('when digits are pressed', () => {
  function pressPackets(digit: DtmfDigit, seq: number, timestamp: number): Buffer[] {
    const packets: Buffer[] = [];
    for (let i = 0; i < 8; i++) {
      const end = i >= 5;
      const payload = serializeTelephoneEvent({
        digit,
        end,
        volume: 10,
        duration: Math.min(i + 1, 6) * 160,
      });
      packets.push(
        serializeRtpPacket({
          payloadType: TELEPHONE_EVENT,
          marker: i === 0,
          sequenceNumber: seq + i,
          timestamp,
          ssrc: 0xcafe,
          payload,
        }),
      );
    }
    return packets;
  }

  it('should report each RFC 4733 press once, in order, and SIP INFO digits in the same stream', async () => {
    const { session, peer, events } = await start();
    await speak(peer, session.localPort, 2);
    for (const packet of [...pressPackets('1', 1002, 8000), ...pressPackets('2', 1010, 9600)]) {
      peer.sendRaw(packet, session.localPort);
      await sleep(5);
    }
    // A retransmission of the first event after the second.
    peer.sendRaw(pressPackets('1', 1002, 8000)[7] as Buffer, session.localPort);
    await sleep(30);
    session.injectDigit('#');
    await waitFor(() => events.filter((e) => e.type === 'dtmf').length >= 3);
    await sleep(50);
    const digits = events.flatMap((e) => (e.type === 'dtmf' ? [`${e.digit}/${e.source}`] : []));
    expect(digits).toEqual(['1/rtp', '2/rtp', '#/sip-info']);
    expect(session.stats().dtmfIn).toBe(3);
  });

  it('should send a digit as telephone-events with three end packets', async () => {
    const { session, peer } = await start();
    session.sendDigit('7', 100);
    await waitFor(
      () => peer.packets().filter((p) => p.payloadType === TELEPHONE_EVENT).length >= 7,
    );
    const te = peer.packets().filter((p) => p.payloadType === TELEPHONE_EVENT);
    const parsed = te.map((p) => parseTelephoneEvent(p.payload));
    expect(parsed.every((e) => e?.digit === '7')).toBe(true);
    expect(parsed.filter((e) => e?.end)).toHaveLength(3);
    expect(new Set(te.map((p) => p.timestamp)).size).toBe(1);
    expect(te[0]?.marker).toBe(true);
  });
});

describe('when media stops', () => {
  it('should emit a media timeout with a reason once no RTP arrives for mediaTimeoutMs', async () => {
    const { session, peer, events } = await start({}, { mediaTimeoutMs: 300 });
    await speak(peer, session.localPort, 3);
    await waitFor(() => events.some((e) => e.type === 'media-timeout'), 2000);
    const timeout = events.find((e) => e.type === 'media-timeout');
    expect(timeout?.type === 'media-timeout' && timeout.reason).toBe('no-rtp');
    expect(timeout?.type === 'media-timeout' && timeout.silentMs).toBeGreaterThanOrEqual(300);
    expect(events.filter((e) => e.type === 'media-timeout')).toHaveLength(1);
  });

  it('should not time out during hold', async () => {
    const { session, events } = await start({}, { mediaTimeoutMs: 200 });
    session.setHold(true);
    await sleep(450);
    expect(events.some((e) => e.type === 'media-timeout')).toBe(false);
  });
});

describe('when RTCP flows', () => {
  it('should send sender reports to port+1 and count valid and invalid incoming RTCP', async () => {
    const rtcpPeer = await RtpPeer.open();
    open.push(rtcpPeer);
    // The RTP peer is the port below the RTCP peer only by chance; use the RTCP peer's port - 1 as remote.
    const { session, peer } = await start({
      remote: { address: '127.0.0.1', port: rtcpPeer.port - 1 },
      rtcpIntervalMs: 100,
    });
    session.play('item', Buffer.alloc(160 * 5, 0x33));
    await waitFor(() => rtcpPeer.received.length >= 2, 2000);
    const report = parseRtcpCompound(rtcpPeer.received[1]?.data ?? Buffer.alloc(0));
    expect(report.ok && report.summary.senderSsrc).toBe(session.ssrc);
    const rtcpPort = session.localPort + 1;
    peer.sendRaw(
      serializeRtcpReport({
        ssrc: 0xcafe,
        cname: 'peer',
        sender: { wallClockMs: Date.now(), rtpTimestamp: 1, packets: 1, octets: 160 },
      }),
      rtcpPort,
    );
    peer.sendRaw(Buffer.from('deadbeef', 'hex'), rtcpPort);
    await sleep(50);
    expect(session.stats().rtcpIn).toBe(1);
    expect(session.stats().dropped['rtcp-invalid']).toBe(1);
    expect(session.stats().rtcpOut).toBeGreaterThanOrEqual(2);
  });
});

describe('when RTP ports run out', () => {
  it('should fail with a 503-mapped error and succeed again once a call hangs up', async () => {
    const small = new RtpPortAllocator({ portMin: PORT_BASE + 40, portMax: PORT_BASE + 43 });
    const options = { ports: small };
    const first = await start(options);
    const second = await start(options);
    expect([first.session.localPort, second.session.localPort].sort()).toEqual([
      PORT_BASE + 40,
      PORT_BASE + 42,
    ]);
    const error = await start(options).catch((e: unknown) => e);
    expect(isCallgateError(error, 'CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED')).toBe(true);
    expect(isCallgateError(error) && error.sipStatus).toBe(503);
    await first.session.close();
    expect(first.events.at(-1)?.type).toBe('closed');
    const third = await start(options);
    expect(third.session.localPort).toBe(first.session.localPort);
    expect(small.inUse).toBe(2);
  });
});
