/**
 * RTCP of an RtpSession: the far end's reports read (where ours go back to, the last sender
 * report for our delay field) and ours sent at a randomized RFC 3550 interval, with a report
 * block on the latched source's stream and, when RTP went out, a sender report.
 */
import type { RemoteInfo } from 'node:dgram';
import * as metrics from './media-metrics.ts';
import type { ReceiveStatistics } from './receive-statistics.ts';
import { parseRtcpCompound, serializeRtcpReport, type RtcpReportBlock } from './rtcp-packet.ts';
import type { RtpSessionContext } from './rtp-session-context.ts';
import type { RtpEndpoint } from './rtp-session-events.ts';

/** RFC 3550 §6.2 minimum RTCP interval; randomized ±50% so calls do not report in lockstep. */
export const RTCP_INTERVAL_MS = 5000;

/** What a report says of what we sent and receive, read from the send and receive paths when one is due. */
export interface RtcpReportSource {
  readonly sendSsrc: number;
  readonly sentSinceReport: boolean;
  rtpTimestampAt(nowMs: number): number;
  reported(): void;
  /** The latched source's SSRC, if one is latched. */
  readonly latchedSsrc: number | undefined;
  readonly receiveStats: ReceiveStatistics;
}

export interface RtpRtcpOptions {
  readonly context: RtpSessionContext;
  readonly sendRtcp: (data: Buffer, to: RtpEndpoint) => void;
  readonly cname: string;
  readonly intervalMs?: number;
  /** When the session opened: the first report is due within one randomized interval of it. */
  readonly openedAt: number;
}

export class RtpRtcp {
  private readonly context: RtpSessionContext;
  private readonly options: RtpRtcpOptions;
  private nextReportAt: number;
  /** Where the latched source's RTCP comes from, once it has sent some. */
  private heardFrom: RtpEndpoint | undefined;
  private lastSenderReport: { ntpMiddle: number; atMs: number } | undefined;

  constructor(options: RtpRtcpOptions) {
    this.context = options.context;
    this.options = options;
    this.nextReportAt = options.openedAt + this.interval();
  }

  /** A report of the far end (any datagram on the RTCP port). */
  receive(data: Buffer, from: RemoteInfo, latchedSsrc: number | undefined, now: number): void {
    const parsed = parseRtcpCompound(data);
    if (!parsed.ok) {
      this.context.drop('rtcp-invalid');
      return;
    }
    this.context.counts.rtcpIn++;
    // Another sender's report says nothing of the stream we receive.
    if (latchedSsrc !== undefined && parsed.summary.senderSsrc !== latchedSsrc) return;
    // The far end's reports (of the latched source, or from the SDP address before any RTP): ours
    // go back where they come from.
    const heard = this.heardFrom;
    if (
      from.address === this.context.remote?.address &&
      (heard === undefined || heard.port !== from.port || heard.address !== from.address)
    ) {
      this.heardFrom = { address: from.address, port: from.port };
    }
    if (parsed.summary.senderReportNtpMiddle !== undefined) {
      this.lastSenderReport = { ntpMiddle: parsed.summary.senderReportNtpMiddle, atMs: now };
    }
  }

  /** Sends our report when one is due. */
  tick(now: number, source: RtcpReportSource): void {
    if (now < this.nextReportAt) return;
    this.nextReportAt = now + this.interval();
    this.sendReport(now, source);
  }

  /** The far end's address changed (SDP, or a relatch to another address): its RTCP source is unknown again. */
  forgetRemote(): void {
    this.heardFrom = undefined;
  }

  /** A new stream is received (SSRC or codec change): the old one's sender report no longer applies. */
  forgetSenderReport(): void {
    this.lastSenderReport = undefined;
  }

  private interval(): number {
    return (this.options.intervalMs ?? RTCP_INTERVAL_MS) * (0.5 + Math.random());
  }

  private sendReport(now: number, source: RtcpReportSource): void {
    const to = this.destination();
    if (to === undefined) return;
    const latchedSsrc = source.latchedSsrc;
    const stats = source.receiveStats;
    // Fields written out rather than spread: a spread beside other fields takes V8's slow clone path.
    const report =
      latchedSsrc === undefined || stats.packetsReceived === 0 ? undefined : stats.report();
    const sr = this.lastSenderReport;
    const block: RtcpReportBlock | undefined =
      latchedSsrc === undefined || report === undefined
        ? undefined
        : {
            ssrc: latchedSsrc,
            extendedHighestSequence: report.extendedHighestSequence,
            cumulativeLost: report.cumulativeLost,
            fractionLost: report.fractionLost,
            jitter: report.jitter,
            lastSenderReport: sr?.ntpMiddle ?? 0,
            delaySinceLastSenderReport: sr ? Math.floor(((now - sr.atMs) / 1000) * 65536) : 0,
          };
    if (block) metrics.rtpJitter.observe(stats.jitterMs / 1000);
    const counts = this.context.counts;
    const data = serializeRtcpReport({
      ssrc: source.sendSsrc,
      cname: this.options.cname,
      sender: source.sentSinceReport
        ? {
            wallClockMs: Date.now(),
            rtpTimestamp: source.rtpTimestampAt(now),
            packets: counts.packetsOut,
            octets: counts.bytesOut,
          }
        : undefined,
      block,
    });
    source.reported();
    this.options.sendRtcp(data, to);
    counts.rtcpOut++;
  }

  /**
   * Where reports go: where the latched source's own reports come from (symmetric RTCP, RFC 4961,
   * which is what gets through a NAT), else the port above the RTP port (RFC 3550 §11); none when
   * the RTP port is 65535 and the far end has sent no report.
   */
  private destination(): RtpEndpoint | undefined {
    const remote = this.context.remote;
    if (remote === undefined) return undefined;
    const heard = this.heardFrom;
    if (heard !== undefined && heard.address === remote.address) return heard;
    return remote.port < 65535 ? { address: remote.address, port: remote.port + 1 } : undefined;
  }
}
