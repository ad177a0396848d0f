/**
 * RTCP (RFC 3550 §6), pure: enough to keep carriers content and to read what the far end
 * reports. Incoming compound packets are validated and summarized (never thrown on); outgoing
 * ones are a sender or receiver report followed by an SDES CNAME, as §6.1 requires.
 */
import type { ReceiveReport } from './receive-statistics.ts';

export const RTCP_SR = 200;
export const RTCP_RR = 201;
export const RTCP_SDES = 202;
export const RTCP_BYE = 203;
/** Seconds from the NTP epoch (1900) to the Unix epoch (1970). */
const NTP_UNIX_OFFSET_SECONDS = 2_208_988_800;
/** Longest compound packet accepted: RTCP is small; anything near the MTU is not ours. */
export const MAX_RTCP_PACKET_BYTES = 1500;

export type RtcpDropReason = 'truncated' | 'too-large' | 'bad-version' | 'bad-length' | 'not-rtcp';

export interface RtcpSummary {
  readonly senderSsrc: number;
  /** Middle 32 bits of the NTP timestamp of a sender report, for LSR (RFC 3550 §6.4.1). */
  readonly senderReportNtpMiddle?: number;
  readonly bye: boolean;
  readonly packets: number;
}

export type RtcpParseResult =
  | { readonly ok: true; readonly summary: RtcpSummary }
  | { readonly ok: false; readonly reason: RtcpDropReason };

export function parseRtcpCompound(data: Buffer): RtcpParseResult {
  if (data.length > MAX_RTCP_PACKET_BYTES) return { ok: false, reason: 'too-large' };
  if (data.length < 8) return { ok: false, reason: 'truncated' };
  let offset = 0;
  let packets = 0;
  let senderSsrc = 0;
  let ntpMiddle: number | undefined;
  let bye = false;
  while (offset < data.length) {
    if (data.length - offset < 4) return { ok: false, reason: 'truncated' };
    const b0 = data[offset] as number;
    const type = data[offset + 1] as number;
    if (b0 >> 6 !== 2) return { ok: false, reason: 'bad-version' };
    if (type < 192 || type > 223) return { ok: false, reason: 'not-rtcp' };
    const bytes = 4 * (data.readUInt16BE(offset + 2) + 1);
    if (offset + bytes > data.length) return { ok: false, reason: 'bad-length' };
    if (packets === 0 && bytes >= 8) senderSsrc = data.readUInt32BE(offset + 4);
    if (type === RTCP_SR && bytes >= 28) ntpMiddle = data.readUInt32BE(offset + 10);
    if (type === RTCP_BYE) bye = true;
    offset += bytes;
    packets++;
  }
  return {
    ok: true,
    summary: {
      senderSsrc,
      bye,
      packets,
      ...(ntpMiddle !== undefined ? { senderReportNtpMiddle: ntpMiddle } : {}),
    },
  };
}

export interface RtcpReportBlock extends ReceiveReport {
  readonly ssrc: number;
  /** Middle 32 bits of the last SR's NTP time from this source (0: none yet). */
  readonly lastSenderReport: number;
  /** Delay since that SR, in 1/65536 s. */
  readonly delaySinceLastSenderReport: number;
}

export interface RtcpReportInit {
  readonly ssrc: number;
  readonly cname: string;
  /** Present when we sent RTP since the last report: a sender report then. */
  readonly sender?: {
    readonly wallClockMs: number;
    readonly rtpTimestamp: number;
    readonly packets: number;
    readonly octets: number;
  };
  readonly block?: RtcpReportBlock;
}

/** An SR (or RR) with at most one report block, then SDES with the CNAME. */
export function serializeRtcpReport(init: RtcpReportInit): Buffer {
  const blocks = init.block ? 1 : 0;
  const reportBytes = (init.sender ? 28 : 8) + 24 * blocks;
  const cname = Buffer.from(init.cname.slice(0, 255), 'utf8');
  // SSRC, CNAME item (type, length, text), END, padded to a 32-bit boundary.
  const sdesBody = 4 + 2 + cname.length + 1;
  const sdesBytes = 4 + ((sdesBody + 3) & ~3);
  const out = Buffer.alloc(reportBytes + sdesBytes);
  out[0] = 0x80 | blocks;
  out[1] = init.sender ? RTCP_SR : RTCP_RR;
  out.writeUInt16BE(reportBytes / 4 - 1, 2);
  out.writeUInt32BE(init.ssrc >>> 0, 4);
  let offset = 8;
  if (init.sender) {
    const seconds = init.sender.wallClockMs / 1000 + NTP_UNIX_OFFSET_SECONDS;
    const whole = Math.floor(seconds);
    out.writeUInt32BE(whole >>> 0, 8);
    out.writeUInt32BE(Math.floor((seconds - whole) * 2 ** 32) >>> 0, 12);
    out.writeUInt32BE(init.sender.rtpTimestamp >>> 0, 16);
    out.writeUInt32BE(init.sender.packets >>> 0, 20);
    out.writeUInt32BE(init.sender.octets >>> 0, 24);
    offset = 28;
  }
  if (init.block) {
    const b = init.block;
    out.writeUInt32BE(b.ssrc >>> 0, offset);
    out.writeUInt32BE(
      (((b.fractionLost & 0xff) << 24) | (b.cumulativeLost & 0xffffff)) >>> 0,
      offset + 4,
    );
    out.writeUInt32BE(b.extendedHighestSequence >>> 0, offset + 8);
    out.writeUInt32BE(b.jitter >>> 0, offset + 12);
    out.writeUInt32BE(b.lastSenderReport >>> 0, offset + 16);
    out.writeUInt32BE(b.delaySinceLastSenderReport >>> 0, offset + 20);
    offset += 24;
  }
  out[offset] = 0x81;
  out[offset + 1] = RTCP_SDES;
  out.writeUInt16BE(sdesBytes / 4 - 1, offset + 2);
  out.writeUInt32BE(init.ssrc >>> 0, offset + 4);
  out[offset + 8] = 1;
  out[offset + 9] = cname.length;
  cname.copy(out, offset + 10);
  return out;
}
