/**
 * The far end's master key identifier (RFC 3711 section 3.1, RFC 4568 `|value:length`), pure:
 * a peer whose crypto line names an MKI puts it in every packet it sends, between the encrypted
 * portion and the authentication tag (after the AEAD ciphertext and its tag, RFC 7714 section
 * 8.1). The MKI is outside what the tag authenticates, so a packet whose MKI is the one the line
 * named is unprotected as if it had none: the bytes are checked and cut out before libsrtp sees
 * the packet (test/unit/media/srtp-mki.test.ts). callgate's own lines never name an MKI.
 */
import type { SrtpSuiteName } from './srtp-transform.ts';

/** Bytes of the authentication tag after the MKI, per suite and packet kind (RFC 4568 6.2). */
function tagBytesAfterMki(suite: SrtpSuiteName, packet: 'rtp' | 'rtcp'): number {
  if (suite === 'AEAD_AES_128_GCM') return 0; // the tag is inside the ciphertext, before the MKI
  if (suite === 'AES_CM_128_HMAC_SHA1_32') return packet === 'rtp' ? 4 : 10; // SRTCP keeps 80 bits
  return 10;
}

/** Smallest packets that can carry an MKI: an RTP (12) or RTCP (8) header plus the trailer. */
const MIN_HEADER_BYTES: Readonly<Record<'rtp' | 'rtcp', number>> = { rtp: 12, rtcp: 8 };

/**
 * `packet` without its MKI (the tag moved up over it, in place), or undefined when the packet is
 * too short to carry one or carries another MKI (a key callgate was never told about).
 */
export function stripMki(
  packet: Buffer,
  mki: Uint8Array,
  suite: SrtpSuiteName,
  kind: 'rtp' | 'rtcp',
): Buffer | undefined {
  const tagBytes = tagBytesAfterMki(suite, kind);
  const mkiStart = packet.length - tagBytes - mki.length;
  if (mkiStart < MIN_HEADER_BYTES[kind]) return undefined;
  if (Buffer.compare(packet.subarray(mkiStart, mkiStart + mki.length), mki) !== 0) return undefined;
  packet.copyWithin(mkiStart, mkiStart + mki.length);
  return packet.subarray(0, packet.length - mki.length);
}

/**
 * `packet` with `mki` put where a peer that uses one puts it: what the far end of a test sends
 * after protecting a packet without one.
 */
export function insertMki(
  packet: Buffer,
  mki: Uint8Array,
  suite: SrtpSuiteName,
  kind: 'rtp' | 'rtcp',
): Buffer {
  const at = packet.length - tagBytesAfterMki(suite, kind);
  return Buffer.concat([packet.subarray(0, at), mki, packet.subarray(at)]);
}
