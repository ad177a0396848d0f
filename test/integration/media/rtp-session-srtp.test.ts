/**
 * SRTP on a live RtpSession (libsrtp2 through gateway/media/native/srtp_binding.c; built by
 * `npm run build:native`, which scripts/bootstrap.sh runs with libsrtp2-dev installed): a peer on
 * loopback with its own SRTP context exchanges audio with the session on both socket engines, and
 * what fails authentication or replays an index is dropped and counted, never heard by the model.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { parseRtpPacket, serializeRtpPacket } from '../../../gateway/media/rtp-packet.ts';
import { serializeRtcpReport } from '../../../gateway/media/rtcp-packet.ts';
import {
  SrtpTransform,
  type SrtpKeys,
  type SrtpSuiteName,
} from '../../../gateway/media/srtp-transform.ts';
import { loadSrtpBinding } from '../../../gateway/media/srtp-binding.ts';
import { insertMki } from '../../../gateway/media/srtp-mki.ts';
import { audioEvents, audioPayload, RtpSessionHarness } from './rtp-session-harness.ts';
import { sleep, waitFor, type RtpPeer } from './rtp-peer.ts';

const harness = new RtpSessionHarness(8);
afterEach(() => harness.closeAll());

const keyBytes = (suite: SrtpSuiteName): number => (suite === 'AEAD_AES_128_GCM' ? 28 : 30);

/** Both ends' keys: callgate's local key is the peer's remote one and the other way round. */
function keyPair(suite: SrtpSuiteName): { callgate: SrtpKeys; peer: SrtpKeys } {
  const a = randomBytes(keyBytes(suite));
  const b = randomBytes(keyBytes(suite));
  return {
    callgate: { suite, localKey: a, remoteKey: b },
    peer: { suite, localKey: b, remoteKey: a },
  };
}

/** An SRTP packet from the peer: RTP protected with the peer's key. */
function protectedPacket(
  peerSrtp: SrtpTransform,
  seq: number,
  payload: Buffer,
  ssrc = 0x5eed,
): Buffer {
  const plain = serializeRtpPacket({
    payloadType: 0,
    marker: seq === 1,
    sequenceNumber: seq,
    timestamp: seq * 160,
    ssrc,
    payload,
  });
  const buffer = Buffer.alloc(plain.length + peerSrtp.trailerBytes);
  plain.copy(buffer);
  return buffer.subarray(0, peerSrtp.protectRtp(buffer, plain.length));
}

async function sendStream(
  peer: RtpPeer,
  port: number,
  srtp: SrtpTransform,
  from: number,
  count: number,
): Promise<void> {
  for (let seq = from; seq < from + count; seq++) {
    peer.sendRaw(protectedPacket(srtp, seq, audioPayload(seq)), port);
    await sleep(20);
  }
}

async function srtpDrops(reason: string): Promise<number> {
  const metric = await registry.getSingleMetric('callgate_rtp_srtp_dropped_total')?.get();
  return (
    metric?.values.find((v) => v.labels.reason === reason && v.labels.packet === 'rtp')?.value ?? 0
  );
}

describe('when the SRTP module is loaded', () => {
  it('should run AES counter mode and HMAC-SHA1 on OpenSSL, whose cost does not grow with the calls', () => {
    const binding = loadSrtpBinding();
    expect(binding instanceof Error ? binding.message : binding.crypto).toBe('openssl');
  });
});

describe.each(['native', 'node'] as const)('on %s RTP sockets with SRTP', (sockets) => {
  describe.each<SrtpSuiteName>([
    'AES_CM_128_HMAC_SHA1_80',
    'AES_CM_128_HMAC_SHA1_32',
    'AEAD_AES_128_GCM',
  ])('when both ends use %s', (suite) => {
    it('should hear the caller and send the model audio encrypted both ways', async () => {
      const keys = keyPair(suite);
      const { session, peer, events } = await harness.start({ srtp: keys.callgate }, { sockets });
      const peerSrtp = new SrtpTransform(keys.peer);
      await sendStream(peer, session.localPort, peerSrtp, 1, 10);
      await waitFor(() => audioEvents(events).length >= 8);
      // The model gets the caller's plain audio: payload bytes are the sequence numbers.
      expect(audioEvents(events)[0]?.[0]).toBe(1);
      expect(session.stats().dropped).toEqual({});

      const speech = Buffer.alloc(160 * 10, 0x2a);
      session.play('item-1', speech);
      session.endItem('item-1');
      await waitFor(() => peer.received.length >= 10);
      const wire = peer.received.slice(0, 10);
      for (const { data } of wire) {
        // On the wire: not the plain payload, and the tag after it.
        expect(data.subarray(12, 172).equals(Buffer.alloc(160, 0x2a))).toBe(false);
        expect(data.length).toBe(
          172 + (suite === 'AES_CM_128_HMAC_SHA1_32' ? 4 : suite === 'AEAD_AES_128_GCM' ? 16 : 10),
        );
        const plain = peerSrtp.unprotectRtp(Buffer.from(data));
        expect(typeof plain).not.toBe('string');
        const parsed = parseRtpPacket(plain as Buffer);
        expect(parsed.ok && parsed.packet.payload.equals(Buffer.alloc(160, 0x2a))).toBe(true);
      }
      peerSrtp.dispose();
    });
  });

  describe.each<SrtpSuiteName>(['AES_CM_128_HMAC_SHA1_80', 'AEAD_AES_128_GCM'])(
    "when the far end's key has an MKI (%s)",
    (suite) => {
      it('should hear packets that carry that MKI and drop those that carry another', async () => {
        const keys = keyPair(suite);
        const mki = Buffer.from([0, 0, 0, 9]);
        const { session, peer, events } = await harness.start(
          { srtp: { ...keys.callgate, remoteMki: mki } },
          { sockets },
        );
        const peerSrtp = new SrtpTransform(keys.peer);
        const unkeyedBefore = await srtpDrops('srtp-unkeyed');
        for (let seq = 1; seq <= 12; seq++) {
          const packet = protectedPacket(peerSrtp, seq, audioPayload(seq));
          // Packet 6 names a key callgate was never told about; 7 has no MKI at all: neither names
          // the key callgate has, so neither is even tried against it.
          const named = seq === 6 ? Buffer.from([0, 0, 0, 8]) : mki;
          peer.sendRaw(
            seq === 7 ? packet : insertMki(packet, named, suite, 'rtp'),
            session.localPort,
          );
          await sleep(20);
        }
        await waitFor(() => audioEvents(events).length >= 10);
        await sleep(100);
        const heard = audioEvents(events).map((audio) => audio[0]);
        expect(heard).not.toContain(6);
        expect(heard).not.toContain(7);
        expect(heard).toContain(12);
        expect(session.stats().dropped).toEqual({ 'srtp-unkeyed': 2 });
        expect(await srtpDrops('srtp-unkeyed')).toBe(unkeyedBefore + 2);
        // What callgate sends carries no MKI: the peer's context, which has none, reads it.
        session.play('mki', Buffer.alloc(160 * 3, 0x44));
        session.endItem('mki');
        await waitFor(() => peer.received.length >= 3);
        const plain = peerSrtp.unprotectRtp(Buffer.from(peer.received[0]?.data ?? Buffer.alloc(0)));
        expect(typeof plain).not.toBe('string');
        peerSrtp.dispose();
      });
    },
  );

  describe("when the far end's key has a lifetime", () => {
    it('should drop what comes with it once used up, until a re-INVITE brings a new key', async () => {
      const first = keyPair('AES_CM_128_HMAC_SHA1_80');
      const { session, peer, events } = await harness.start(
        { srtp: { ...first.callgate, remoteLifetime: 5 } },
        { sockets },
      );
      const oldPeer = new SrtpTransform(first.peer);
      await sendStream(peer, session.localPort, oldPeer, 1, 8);
      await waitFor(() => (session.stats().dropped['srtp-unkeyed'] ?? 0) >= 3);
      expect(audioEvents(events).map((audio) => audio[0])).not.toContain(6);

      const second = keyPair('AES_CM_128_HMAC_SHA1_80');
      session.setSrtp({ ...second.callgate, localKey: first.callgate.localKey });
      const newPeer = new SrtpTransform({ ...second.peer, remoteKey: first.peer.remoteKey });
      await sendStream(peer, session.localPort, newPeer, 9, 5);
      await waitFor(() => audioEvents(events).some((audio) => audio[0] === 13));
      const heard = audioEvents(events).map((audio) => audio[0]);
      for (const seq of [6, 7, 8]) expect(heard).not.toContain(seq);
      expect(session.stats().dropped).toEqual({ 'srtp-unkeyed': 3 });
      oldPeer.dispose();
      newPeer.dispose();
    });
  });

  describe('when a packet is tampered with or replayed', () => {
    it('should drop and count it, and the model never hears it', async () => {
      const keys = keyPair('AES_CM_128_HMAC_SHA1_80');
      const { session, peer, events } = await harness.start({ srtp: keys.callgate }, { sockets });
      const peerSrtp = new SrtpTransform(keys.peer);
      const authBefore = await srtpDrops('srtp-auth');
      const replayBefore = await srtpDrops('srtp-replay');
      await sendStream(peer, session.localPort, peerSrtp, 1, 5);

      const tampered = protectedPacket(peerSrtp, 6, audioPayload(0xee));
      tampered[20] = (tampered[20] as number) ^ 0x01;
      peer.sendRaw(tampered, session.localPort);
      const replayed = protectedPacket(peerSrtp, 7, audioPayload(0xdd));
      peer.sendRaw(replayed, session.localPort);
      await sleep(20);
      peer.sendRaw(replayed, session.localPort);
      // A plain RTP packet carries no valid tag either.
      peer.send(
        {
          payloadType: 0,
          marker: false,
          sequenceNumber: 8,
          timestamp: 1280,
          ssrc: 0x5eed,
          payload: audioPayload(0xcc),
        },
        session.localPort,
      );
      await sendStream(peer, session.localPort, peerSrtp, 9, 5);
      await waitFor(() => audioEvents(events).length >= 10);
      await sleep(100);

      expect(session.stats().dropped).toEqual({ 'srtp-auth': 2, 'srtp-replay': 1 });
      expect(await srtpDrops('srtp-auth')).toBe(authBefore + 2);
      expect(await srtpDrops('srtp-replay')).toBe(replayBefore + 1);
      const heard = audioEvents(events).map((audio) => audio[0]);
      expect(heard).not.toContain(0xee);
      expect(heard).not.toContain(0xcc);
      expect(heard.filter((byte) => byte === 0xdd)).toHaveLength(1);
      peerSrtp.dispose();
    });
  });

  describe('when the far end sends SRTCP and callgate reports', () => {
    it('should read the protected reports and protect its own', async () => {
      const keys = keyPair('AES_CM_128_HMAC_SHA1_80');
      const { session, peer } = await harness.start(
        { srtp: keys.callgate, rtcpIntervalMs: 200 },
        { sockets },
      );
      const peerSrtp = new SrtpTransform(keys.peer);
      await sendStream(peer, session.localPort, peerSrtp, 1, 5);
      const report = serializeRtcpReport({ ssrc: 0x5eed, cname: 'peer' });
      const secured = peerSrtp.protectRtcp(report);
      if (secured === undefined) throw new Error('SRTCP protect failed');
      peer.sendRaw(secured, session.localPort + 1);
      await waitFor(() => session.stats().rtcpIn === 1);
      await waitFor(
        () => peer.received.some(({ data }) => data[1] === 200 || data[1] === 201),
        5000,
      );
      const rtcp = peer.received.find(({ data }) => data[1] === 200 || data[1] === 201);
      const plain = peerSrtp.unprotectRtcp(Buffer.from(rtcp?.data ?? Buffer.alloc(0)));
      expect(typeof plain).not.toBe('string');
      // The report is encrypted on the wire (SRTCP E flag set).
      expect(rtcp?.data.includes(Buffer.from('callgate'))).toBe(false);
      peerSrtp.dispose();
    });
  });

  describe('when a re-INVITE brings new keys', () => {
    it('should carry on with the new keys and still take the old key until the new one is heard', async () => {
      const first = keyPair('AES_CM_128_HMAC_SHA1_80');
      const { session, peer, events } = await harness.start({ srtp: first.callgate }, { sockets });
      const oldPeer = new SrtpTransform(first.peer);
      await sendStream(peer, session.localPort, oldPeer, 1, 5);
      const second = keyPair('AES_CM_128_HMAC_SHA1_32');
      const sameSuite = {
        ...second,
        callgate: { ...second.callgate, suite: first.callgate.suite },
        peer: { ...second.peer, suite: first.callgate.suite },
      };
      session.setSrtp(sameSuite.callgate);
      // In flight before the far end saw the answer: its old key still authenticates.
      await sendStream(peer, session.localPort, oldPeer, 6, 2);
      const newPeer = new SrtpTransform(sameSuite.peer);
      await sendStream(peer, session.localPort, newPeer, 8, 5);
      // After a packet with the new key, the old key is gone.
      peer.sendRaw(protectedPacket(oldPeer, 13, audioPayload(0xab)), session.localPort);
      await waitFor(() => audioEvents(events).length >= 10);
      await sleep(100);
      expect(session.stats().dropped).toEqual({ 'srtp-auth': 1 });
      expect(audioEvents(events).map((audio) => audio[0])).not.toContain(0xab);

      session.play('after-rekey', Buffer.alloc(160 * 3, 0x33));
      session.endItem('after-rekey');
      await waitFor(() => peer.received.length >= 3);
      const plain = newPeer.unprotectRtp(
        Buffer.from(peer.received[peer.received.length - 1]?.data ?? Buffer.alloc(0)),
      );
      expect(typeof plain).not.toBe('string');
      oldPeer.dispose();
      newPeer.dispose();
    });
  });
});
