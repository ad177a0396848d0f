/**
 * The SRTP module's packets checked by a second implementation: RFC 3711's key derivation and
 * packet transforms (and RFC 7714's for GCM) written here on node:crypto, apart from libsrtp and
 * from the OpenSSL primitives the module gives it (native/srtp_openssl_crypto.c). What callgate
 * protects, this reads; what this protects, callgate reads; a flipped bit fails in both.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { serializeRtpPacket } from '../../../gateway/media/rtp-packet.ts';
import { SrtpTransform, type SrtpSuiteName } from '../../../gateway/media/srtp-transform.ts';

/** RFC 3711 section 4.3.1: the AES-CM PRF over the master salt (padded to 14 bytes) and a label. */
function derive(masterKey: Buffer, masterSalt: Buffer, label: number, bytes: number): Buffer {
  const x = Buffer.concat([masterSalt, Buffer.alloc(14 - masterSalt.length)]);
  x[7] = (x[7] as number) ^ label;
  const iv = Buffer.concat([x, Buffer.alloc(2)]);
  return createCipheriv('aes-128-ctr', masterKey, iv).update(Buffer.alloc(bytes));
}

interface Peer {
  readonly suite: SrtpSuiteName;
  readonly key: Buffer;
  readonly salt: Buffer;
  readonly auth?: Buffer;
}

function peerOf(suite: SrtpSuiteName, keySalt: Buffer): Peer {
  const master = keySalt.subarray(0, 16);
  const masterSalt = keySalt.subarray(16);
  const gcm = suite === 'AEAD_AES_128_GCM';
  return {
    suite,
    key: derive(master, masterSalt, 0x00, 16),
    salt: derive(master, masterSalt, 0x02, gcm ? 12 : 14),
    ...(!gcm && { auth: derive(master, masterSalt, 0x01, 20) }),
  };
}

const tagBytes = (suite: SrtpSuiteName): number =>
  suite === 'AEAD_AES_128_GCM' ? 16 : suite === 'AES_CM_128_HMAC_SHA1_32' ? 4 : 10;

/** The counter-mode IV (RFC 3711 4.1.1) or the AEAD IV (RFC 7714 8.1) of packet index 0 || seq. */
function ivOf(peer: Peer, header: Buffer): Buffer {
  const ssrc = header.subarray(8, 12);
  const seq = header.subarray(2, 4);
  if (peer.suite === 'AEAD_AES_128_GCM') {
    const block = Buffer.concat([Buffer.alloc(2), ssrc, Buffer.alloc(4), seq]);
    return Buffer.from(block.map((byte, i) => byte ^ (peer.salt[i] as number)));
  }
  const block = Buffer.concat([Buffer.alloc(4), ssrc, Buffer.alloc(4), seq]);
  return Buffer.concat([
    Buffer.from(block.map((byte, i) => byte ^ (peer.salt[i] as number))),
    Buffer.alloc(2),
  ]);
}

function protect(peer: Peer, plain: Buffer): Buffer {
  const header = plain.subarray(0, 12);
  const payload = plain.subarray(12);
  if (peer.suite === 'AEAD_AES_128_GCM') {
    const cipher = createCipheriv('aes-128-gcm', peer.key, ivOf(peer, header));
    cipher.setAAD(header);
    const body = Buffer.concat([cipher.update(payload), cipher.final()]);
    return Buffer.concat([header, body, cipher.getAuthTag()]);
  }
  const body = createCipheriv('aes-128-ctr', peer.key, ivOf(peer, header)).update(payload);
  const tag = createHmac('sha1', peer.auth ?? Buffer.alloc(0))
    .update(Buffer.concat([header, body, Buffer.alloc(4)]))
    .digest()
    .subarray(0, tagBytes(peer.suite));
  return Buffer.concat([header, body, tag]);
}

/** The plain packet, or undefined when its tag does not verify. */
function unprotect(peer: Peer, packet: Buffer): Buffer | undefined {
  const header = packet.subarray(0, 12);
  const tag = packet.subarray(packet.length - tagBytes(peer.suite));
  const body = packet.subarray(12, packet.length - tag.length);
  if (peer.suite === 'AEAD_AES_128_GCM') {
    const decipher = createDecipheriv('aes-128-gcm', peer.key, ivOf(peer, header));
    decipher.setAAD(header);
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([header, decipher.update(body), decipher.final()]);
    } catch {
      return undefined;
    }
  }
  const expected = createHmac('sha1', peer.auth ?? Buffer.alloc(0))
    .update(Buffer.concat([header, body, Buffer.alloc(4)]))
    .digest()
    .subarray(0, tag.length);
  if (!expected.equals(tag)) return undefined;
  return Buffer.concat([
    header,
    createCipheriv('aes-128-ctr', peer.key, ivOf(peer, header)).update(body),
  ]);
}

const rtp = (seq: number): Buffer =>
  serializeRtpPacket({
    payloadType: 0,
    marker: false,
    sequenceNumber: seq,
    timestamp: seq * 160,
    ssrc: 0x1234abcd,
    payload: randomBytes(160),
  });

describe.each<SrtpSuiteName>([
  'AES_CM_128_HMAC_SHA1_80',
  'AES_CM_128_HMAC_SHA1_32',
  'AEAD_AES_128_GCM',
])('with %s', (suite) => {
  const bytes = suite === 'AEAD_AES_128_GCM' ? 28 : 30;

  it('should send packets the second implementation reads, and refuse one with a flipped bit', () => {
    const localKey = randomBytes(bytes);
    const callgate = new SrtpTransform({ suite, localKey });
    const peer = peerOf(suite, localKey);
    for (const seq of [1, 2, 3, 500]) {
      const plain = rtp(seq);
      const buffer = Buffer.alloc(plain.length + callgate.trailerBytes);
      plain.copy(buffer);
      const sent = buffer.subarray(0, callgate.protectRtp(buffer, plain.length));
      expect(sent.length).toBe(plain.length + tagBytes(suite));
      expect(unprotect(peer, Buffer.from(sent))).toEqual(plain);
      sent[20] = (sent[20] as number) ^ 0x01;
      expect(unprotect(peer, sent)).toBeUndefined();
    }
    callgate.dispose();
  });

  it('should read packets the second implementation protects, and drop a forged one', () => {
    const remoteKey = randomBytes(bytes);
    const callgate = new SrtpTransform({ suite, localKey: randomBytes(bytes), remoteKey });
    const peer = peerOf(suite, remoteKey);
    for (const seq of [7, 8, 9, 900]) {
      const plain = rtp(seq);
      expect(callgate.unprotectRtp(protect(peer, plain))).toEqual(plain);
    }
    const forged = protect(peer, rtp(901));
    forged[30] = (forged[30] as number) ^ 0x80;
    expect(callgate.unprotectRtp(forged)).toBe('srtp-auth');
    callgate.dispose();
  });
});
