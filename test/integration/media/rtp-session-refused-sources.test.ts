/**
 * RTP from an address the call did not name ("RTP bleed"), over real UDP: a sender on another
 * loopback address (127.0.0.2) never latches the call's media, at its start or after the caller
 * fell silent, never receives the agent's audio and never reaches the model; the named caller
 * rebinding to another port is still followed, and its digits on an SSRC of their own are heard
 * at once. With SRTP, a packet that fails authentication latches nothing.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { serializeRtpPacket } from '../../../gateway/media/rtp-packet.ts';
import type { RtpSessionEvent } from '../../../gateway/media/rtp-session-events.ts';
import { SrtpTransform } from '../../../gateway/media/srtp-transform.ts';
import { serializeTelephoneEvent } from '../../../gateway/media/telephone-event.ts';
import {
  RtpSessionHarness,
  TELEPHONE_EVENT,
  audioEvents,
  audioPayload,
  stream,
} from './rtp-session-harness.ts';
import { sleep, waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(9);
afterEach(() => harness.closeAll());

const HOSTILE = 0xee;
const CALLER_SSRC = 0xcafe;
const OTHER_HOST = '127.0.0.2';

function latches(events: readonly RtpSessionEvent[]): string[] {
  return events.flatMap((e) =>
    e.type === 'remote-latched' ? [`${e.remote.address}:${e.remote.port}`] : [],
  );
}

async function refusedSourceDrops(): Promise<number> {
  const metric = await registry.getSingleMetric('callgate_rtp_dropped_packets_total')?.get();
  return metric?.values.find((v) => v.labels.reason === 'refused-source')?.value ?? 0;
}

describe('when another host sends to the call port before the caller does', () => {
  it('should latch nothing of it, send it nothing and give the model nothing of it', async () => {
    const { session, peer, events } = await harness.start();
    const attacker = await harness.peer(OTHER_HOST);
    const before = await refusedSourceDrops();
    session.play('greeting', Buffer.alloc(160 * 50, 0x11));
    await stream(attacker, session.localPort, 20, {
      ssrc: 0xbad,
      firstSeq: 1,
      firstByte: HOSTILE,
      payload: () => audioPayload(HOSTILE),
    });
    expect(latches(events)).toEqual([]);
    expect(session.stats().dropped['refused-source']).toBe(20);
    // The caller speaks up: it is latched, and the agent's audio keeps going to it alone.
    await stream(peer, session.localPort, 10, { ssrc: CALLER_SSRC, firstSeq: 100, firstByte: 0 });
    await waitFor(() => audioEvents(events).length >= 8);
    expect(latches(events)).toEqual([`127.0.0.1:${peer.port}`]);
    expect(attacker.received).toHaveLength(0);
    expect(peer.packets().length).toBeGreaterThanOrEqual(20);
    expect(audioEvents(events).some((b) => b[0] === HOSTILE)).toBe(false);
    await session.close();
    expect((await refusedSourceDrops()) - before).toBe(20);
  });
});

describe('when another host sends after the caller has been silent for 1.5 s', () => {
  it('should keep the caller latched and its audio going to the caller only', async () => {
    const { session, peer, events } = await harness.start({
      remote: { address: '127.0.0.1', port: 9 },
    });
    const attacker = await harness.peer(OTHER_HOST);
    await stream(peer, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 1000, firstByte: 0 });
    await sleep(1500);
    const heardBefore = peer.packets().length;
    session.play('answer', Buffer.alloc(160 * 40, 0x22));
    // An attacker who saw the SSRC and the sequence numbers, sending in perfect sequence.
    await stream(attacker, session.localPort, 20, {
      ssrc: CALLER_SSRC,
      firstSeq: 1005,
      firstByte: HOSTILE,
      payload: () => audioPayload(HOSTILE),
    });
    await waitFor(() => peer.packets().length - heardBefore >= 20);
    expect(latches(events)).toEqual([`127.0.0.1:${peer.port}`]);
    expect(session.remoteEndpoint).toEqual({ address: '127.0.0.1', port: peer.port });
    expect(attacker.received).toHaveLength(0);
    expect(audioEvents(events).some((b) => b[0] === HOSTILE)).toBe(false);
    expect(session.stats()).toMatchObject({ relatches: 0, ssrcChanges: 0 });
    expect(session.stats().dropped['refused-source']).toBe(20);
  });
});

describe('when the caller behind NAT is rebound to another port of its address', () => {
  it('should follow it there after the silence rule and send the agent audio to the new port', async () => {
    const { session, peer, events } = await harness.start();
    await stream(peer, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 1, firstByte: 0 });
    await sleep(1100);
    const rebound = await harness.peer();
    await stream(rebound, session.localPort, 5, {
      ssrc: CALLER_SSRC,
      firstSeq: 6,
      firstByte: 5,
    });
    expect(latches(events)).toEqual([`127.0.0.1:${peer.port}`, `127.0.0.1:${rebound.port}`]);
    session.play('answer', Buffer.alloc(160 * 10, 0x33));
    await waitFor(() => rebound.packets().length >= 8);
    expect(audioEvents(events).map((b) => b[0])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});

describe('when the caller sends a digit on an SSRC of its own in its first second', () => {
  it('should hear the digit at once, and keep the audio stream as it was', async () => {
    const { session, peer, events } = await harness.start();
    const audio = stream(peer, session.localPort, 20, {
      ssrc: CALLER_SSRC,
      firstSeq: 1,
      firstByte: 0,
    });
    await sleep(100);
    for (let i = 0; i < 6; i++) {
      peer.send(
        {
          payloadType: TELEPHONE_EVENT,
          marker: i === 0,
          sequenceNumber: 5000 + i,
          timestamp: 777_000,
          ssrc: 0xd7d7,
          payload: serializeTelephoneEvent({
            digit: '7',
            end: i >= 3,
            volume: 10,
            duration: Math.min(i + 1, 4) * 160,
          }),
        },
        session.localPort,
      );
      await sleep(20);
    }
    await audio;
    await waitFor(() => audioEvents(events).length >= 18);
    expect(events.flatMap((e) => (e.type === 'dtmf' ? [e.digit] : []))).toEqual(['7']);
    expect(events.some((e) => e.type === 'ssrc-changed')).toBe(false);
    expect(session.stats().dropped).toEqual({});
  });
});

describe('when SRTP packets that fail authentication come from a new address', () => {
  it('should latch nothing, and latch the caller whose packets authenticate', async () => {
    const a = randomBytes(30);
    const b = randomBytes(30);
    const suite = 'AES_CM_128_HMAC_SHA1_80' as const;
    const { session, peer, events } = await harness.start({
      srtp: { suite, localKey: a, remoteKey: b },
    });
    const peerSrtp = new SrtpTransform({ suite, localKey: b, remoteKey: a });
    const forger = await harness.peer();
    const stranger = await harness.peer(OTHER_HOST);
    const protect = (seq: number, byte: number): Buffer => {
      const plain = serializeRtpPacket({
        payloadType: 0,
        marker: false,
        sequenceNumber: seq,
        timestamp: seq * 160,
        ssrc: CALLER_SSRC,
        payload: audioPayload(byte),
      });
      const buffer = Buffer.alloc(plain.length + peerSrtp.trailerBytes);
      plain.copy(buffer);
      return Buffer.from(buffer.subarray(0, peerSrtp.protectRtp(buffer, plain.length)));
    };
    session.play('greeting', Buffer.alloc(160 * 50, 0x11));
    // Real packets with their tag flipped, from a named address (another port) and another host.
    for (let seq = 1; seq <= 10; seq++) {
      const forged = protect(seq, HOSTILE);
      forged[forged.length - 1] = (forged[forged.length - 1] as number) ^ 0xff;
      forger.sendRaw(forged, session.localPort);
      stranger.sendRaw(forged, session.localPort);
      await sleep(5);
    }
    await waitFor(() => (session.stats().dropped['srtp-auth'] ?? 0) >= 20);
    expect(latches(events)).toEqual([]);
    for (let seq = 11; seq <= 20; seq++) {
      peer.sendRaw(protect(seq, seq), session.localPort);
      await sleep(20);
    }
    await waitFor(() => audioEvents(events).length >= 8);
    expect(latches(events)).toEqual([`127.0.0.1:${peer.port}`]);
    expect(audioEvents(events).some((b) => b[0] === HOSTILE)).toBe(false);
    expect(forger.received).toHaveLength(0);
    expect(stranger.received).toHaveLength(0);
  });
});
