/**
 * CPU per packet of SRTP alone (no sockets, no scheduling): protect and unprotect of a 20 ms PCMU
 * packet (12 + 160 bytes) through callgate's libsrtp2 binding (SrtpTransform) for each suite,
 * against the same AES_CM_128_HMAC_SHA1_80 work done with Node's crypto (AES-128-CTR and
 * HMAC-SHA1 per packet, as a Node implementation would have to), to decide where the per-packet
 * work runs (bench/RESULTS.md).
 *
 *   npx tsx bench/srtp-bench.ts [--packets 200000]
 */
import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { serializeRtpPacket } from '../gateway/media/rtp-packet.ts';
import { SrtpTransform, type SrtpSuiteName } from '../gateway/media/srtp-transform.ts';
import { argument } from './args.ts';

const PAYLOAD_BYTES = 160;

function cpuMicros(work: () => void): number {
  const start = process.cpuUsage();
  work();
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

function packetAt(seq: number): Buffer {
  return serializeRtpPacket({
    payloadType: 0,
    sequenceNumber: seq & 0xffff,
    timestamp: seq * 160,
    ssrc: 0x1234,
    payload: Buffer.alloc(PAYLOAD_BYTES, 0x55),
  });
}

/** µs per protect and per unprotect through libsrtp. */
function libsrtp(suite: SrtpSuiteName, packets: number): { protect: number; unprotect: number } {
  const bytes = suite === 'AEAD_AES_128_GCM' ? 28 : 30;
  const a = randomBytes(bytes);
  const b = randomBytes(bytes);
  const sender = new SrtpTransform({ suite, localKey: a, remoteKey: b });
  const receiver = new SrtpTransform({ suite, localKey: b, remoteKey: a });
  const plain = packetAt(0);
  const wire: Buffer[] = [];
  const buffer = Buffer.alloc(plain.length + sender.trailerBytes);
  const protect = cpuMicros(() => {
    for (let i = 0; i < packets; i++) {
      plain.copy(buffer);
      buffer.writeUInt16BE(i & 0xffff, 2);
      const length = sender.protectRtp(buffer, plain.length);
      if (i < 65_000) wire.push(Buffer.from(buffer.subarray(0, length)));
    }
  });
  const unprotect = cpuMicros(() => {
    for (const packet of wire) {
      const result = receiver.unprotectRtp(packet);
      if (typeof result === 'string') throw new Error(`unprotect failed: ${result}`);
    }
  });
  sender.dispose();
  receiver.dispose();
  return { protect: protect / packets, unprotect: unprotect / wire.length };
}

/** µs per packet for AES_CM_128_HMAC_SHA1_80's protect work in Node's crypto. */
function nodeCrypto(packets: number): number {
  const key = randomBytes(16);
  const authKey = randomBytes(20);
  const iv = Buffer.alloc(16);
  const roc = Buffer.alloc(4);
  const plain = packetAt(0);
  return (
    cpuMicros(() => {
      for (let i = 0; i < packets; i++) {
        iv.writeUInt32BE(i, 12);
        const cipher = createCipheriv('aes-128-ctr', key, iv);
        const encrypted = cipher.update(plain.subarray(12));
        const hmac = createHmac('sha1', authKey);
        hmac.update(plain.subarray(0, 12));
        hmac.update(encrypted);
        hmac.update(roc);
        hmac.digest();
      }
    }) / packets
  );
}

const packets = Number(argument('packets', '200000'));
console.log(`srtp bench: ${packets} packets of ${12 + PAYLOAD_BYTES} bytes, CPU µs per packet`);
for (const suite of [
  'AES_CM_128_HMAC_SHA1_80',
  'AES_CM_128_HMAC_SHA1_32',
  'AEAD_AES_128_GCM',
] as const) {
  const { protect, unprotect } = libsrtp(suite, packets);
  console.log(
    `libsrtp2 ${suite.padEnd(24)} protect ${protect.toFixed(2)}  unprotect ${unprotect.toFixed(2)}`,
  );
}
console.log(`node crypto AES_CM_128_HMAC_SHA1_80 protect ${nodeCrypto(packets).toFixed(2)}`);
