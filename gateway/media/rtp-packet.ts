/**
 * RTP packets (RFC 3550 §5.1), pure: bytes in, a packet or a drop reason out. Nothing here throws
 * on input from the network; a caller counts the drop reason and moves on.
 */

export const RTP_VERSION = 2;
/** Fixed header: V/P/X/CC, M/PT, sequence, timestamp, SSRC. */
export const RTP_HEADER_BYTES = 12;
/**
 * Largest datagram accepted. An Ethernet MTU holds any sane voice frame (an Opus 20 ms frame is
 * at most 1275 bytes); anything bigger is a fragmented or hostile datagram, not telephony.
 */
export const MAX_RTP_PACKET_BYTES = 1500;

export interface RtpHeaderExtension {
  /** "Defined by profile" 16 bits (0xBEDE for RFC 8285 one-byte headers). */
  readonly profile: number;
  /** Extension body, a multiple of 4 bytes. */
  readonly data: Buffer;
}

export interface RtpPacket {
  readonly marker: boolean;
  readonly payloadType: number;
  readonly sequenceNumber: number;
  readonly timestamp: number;
  readonly ssrc: number;
  readonly csrcs: readonly number[];
  readonly extension?: RtpHeaderExtension;
  /** Number of padding bytes at the end (0: no padding). */
  readonly paddingBytes: number;
  readonly payload: Buffer;
}

export type RtpDropReason =
  | 'truncated'
  | 'too-large'
  | 'bad-version'
  | 'csrc-truncated'
  | 'extension-truncated'
  | 'bad-padding'
  /** Second byte 192-223: RTCP multiplexed on the RTP port (RFC 5761 §4), not RTP. */
  | 'rtcp';

export type RtpParseResult =
  | { readonly ok: true; readonly packet: RtpPacket }
  | { readonly ok: false; readonly reason: RtpDropReason };

export const RTP_DROP_REASONS: readonly RtpDropReason[] = [
  'truncated',
  'too-large',
  'bad-version',
  'csrc-truncated',
  'extension-truncated',
  'bad-padding',
  'rtcp',
];

/** Most packets carry no CSRCs: they share one empty list instead of allocating their own. */
const NO_CSRCS: readonly number[] = Object.freeze([]);

function drop(reason: RtpDropReason): RtpParseResult {
  return { ok: false, reason };
}

/** Parses one datagram. The payload is a view into `data`, not a copy. */
export function parseRtpPacket(
  data: Buffer,
  maxBytes: number = MAX_RTP_PACKET_BYTES,
): RtpParseResult {
  if (data.length > maxBytes) return drop('too-large');
  if (data.length < RTP_HEADER_BYTES) return drop('truncated');
  const b0 = data[0] as number;
  const b1 = data[1] as number;
  if (b0 >> 6 !== RTP_VERSION) return drop('bad-version');
  if (b1 >= 192 && b1 <= 223) return drop('rtcp');
  const hasPadding = (b0 & 0x20) !== 0;
  const hasExtension = (b0 & 0x10) !== 0;
  const csrcCount = b0 & 0x0f;
  let offset = RTP_HEADER_BYTES;
  if (data.length < offset + 4 * csrcCount) return drop('csrc-truncated');
  let csrcs = NO_CSRCS;
  if (csrcCount > 0) {
    const list: number[] = [];
    for (let i = 0; i < csrcCount; i++) {
      list.push(data.readUInt32BE(offset));
      offset += 4;
    }
    csrcs = list;
  }
  let extension: RtpHeaderExtension | undefined;
  if (hasExtension) {
    if (data.length < offset + 4) return drop('extension-truncated');
    const profile = data.readUInt16BE(offset);
    const words = data.readUInt16BE(offset + 2);
    offset += 4;
    if (data.length < offset + 4 * words) return drop('extension-truncated');
    extension = { profile, data: data.subarray(offset, offset + 4 * words) };
    offset += 4 * words;
  }
  let end = data.length;
  let paddingBytes = 0;
  if (hasPadding) {
    // The last byte counts itself (RFC 3550 §5.1), so 0 is invalid.
    paddingBytes = data[data.length - 1] as number;
    if (paddingBytes === 0 || offset + paddingBytes > data.length) return drop('bad-padding');
    end -= paddingBytes;
  }
  // Header fields read byte by byte and no object spread: this runs for every received packet.
  const marker = (b1 & 0x80) !== 0;
  const payloadType = b1 & 0x7f;
  const sequenceNumber = ((data[2] as number) << 8) | (data[3] as number);
  const timestamp =
    (((data[4] as number) << 24) |
      ((data[5] as number) << 16) |
      ((data[6] as number) << 8) |
      (data[7] as number)) >>>
    0;
  const ssrc =
    (((data[8] as number) << 24) |
      ((data[9] as number) << 16) |
      ((data[10] as number) << 8) |
      (data[11] as number)) >>>
    0;
  const payload = data.subarray(offset, end);
  const packet: RtpPacket =
    extension === undefined
      ? { marker, payloadType, sequenceNumber, timestamp, ssrc, csrcs, paddingBytes, payload }
      : {
          marker,
          payloadType,
          sequenceNumber,
          timestamp,
          ssrc,
          csrcs,
          paddingBytes,
          payload,
          extension,
        };
  return { ok: true, packet };
}

export interface RtpPacketInit {
  readonly marker?: boolean;
  readonly payloadType: number;
  readonly sequenceNumber: number;
  readonly timestamp: number;
  readonly ssrc: number;
  readonly csrcs?: readonly number[];
  readonly extension?: RtpHeaderExtension;
  readonly paddingBytes?: number;
  readonly payload: Buffer;
}

/** Length of the datagram `serializeRtpPacket` produces for `init`. */
export function rtpPacketLength(init: RtpPacketInit): number {
  const csrcCount = init.csrcs?.length ?? 0;
  const extensionBytes = init.extension ? 4 + roundUp4(init.extension.data.length) : 0;
  return (
    RTP_HEADER_BYTES +
    4 * csrcCount +
    extensionBytes +
    init.payload.length +
    (init.paddingBytes ?? 0)
  );
}

/**
 * Serializes a packet. Out-of-range fields are masked to their width (sequence to 16 bits,
 * timestamp and SSRC to 32) because senders count past the wrap on purpose; a CSRC list longer
 * than 15 or padding outside 0-255 is a programming error and throws.
 */
export function serializeRtpPacket(init: RtpPacketInit, into?: Buffer): Buffer {
  const csrcs = init.csrcs ?? [];
  const padding = init.paddingBytes ?? 0;
  if (csrcs.length > 15) throw new RangeError('an RTP packet carries at most 15 CSRCs');
  if (!Number.isInteger(padding) || padding < 0 || padding > 255)
    throw new RangeError('RTP padding must be 0-255 bytes');
  const length = rtpPacketLength(init);
  const out = into && into.length >= length ? into.subarray(0, length) : Buffer.allocUnsafe(length);
  out[0] =
    (RTP_VERSION << 6) | (padding > 0 ? 0x20 : 0) | (init.extension ? 0x10 : 0) | csrcs.length;
  out[1] = (init.marker ? 0x80 : 0) | (init.payloadType & 0x7f);
  out.writeUInt16BE(init.sequenceNumber & 0xffff, 2);
  out.writeUInt32BE(init.timestamp >>> 0, 4);
  out.writeUInt32BE(init.ssrc >>> 0, 8);
  let offset = RTP_HEADER_BYTES;
  for (const csrc of csrcs) {
    out.writeUInt32BE(csrc >>> 0, offset);
    offset += 4;
  }
  if (init.extension) {
    const words = roundUp4(init.extension.data.length) / 4;
    out.writeUInt16BE(init.extension.profile & 0xffff, offset);
    out.writeUInt16BE(words, offset + 2);
    offset += 4;
    init.extension.data.copy(out, offset);
    out.fill(0, offset + init.extension.data.length, offset + 4 * words);
    offset += 4 * words;
  }
  init.payload.copy(out, offset);
  offset += init.payload.length;
  if (padding > 0) {
    out.fill(0, offset, offset + padding - 1);
    out[offset + padding - 1] = padding;
  }
  return out;
}

/**
 * Only the 12-byte fixed header of a packet without CSRCs, extension or padding: the send path
 * hands header and payload to the socket as two buffers, so the payload is never copied.
 */
export function serializeRtpHeader(
  init: Omit<RtpPacketInit, 'payload' | 'csrcs' | 'extension' | 'paddingBytes'>,
): Buffer {
  const out = Buffer.allocUnsafe(RTP_HEADER_BYTES);
  out[0] = RTP_VERSION << 6;
  out[1] = (init.marker ? 0x80 : 0) | (init.payloadType & 0x7f);
  out.writeUInt16BE(init.sequenceNumber & 0xffff, 2);
  out.writeUInt32BE(init.timestamp >>> 0, 4);
  out.writeUInt32BE(init.ssrc >>> 0, 8);
  return out;
}

function roundUp4(n: number): number {
  return (n + 3) & ~3;
}
