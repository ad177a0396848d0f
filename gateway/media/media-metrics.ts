/**
 * Process-wide media metrics (all calls together); each RtpSession keeps its own counts in
 * `stats()` and adds them here. Per-call numbers stay out of Prometheus labels: a label per call
 * would be unbounded cardinality.
 */
import { counter, gauge, histogram } from '../../config/metrics.ts';

export const rtpPackets = counter<'direction'>({ name: 'callgate_rtp_packets_total', help: 'RTP packets, by direction (in, out)', labelNames: ['direction'] });
export const rtpBytes = counter<'direction'>({ name: 'callgate_rtp_bytes_total', help: 'RTP bytes (whole datagrams), by direction', labelNames: ['direction'] });
export const rtpDropped = counter<'reason'>({
  name: 'callgate_rtp_dropped_packets_total',
  help: 'Received RTP/RTCP datagrams dropped before the jitter buffer, by reason',
  labelNames: ['reason'],
});
export const rtpLost = counter({ name: 'callgate_rtp_lost_packets_total', help: 'Received frames missing at playout time (sequence gaps)' });
export const rtpLate = counter({ name: 'callgate_rtp_late_packets_total', help: 'Packets that arrived after their playout slot' });
export const rtpDiscarded = counter<'reason'>({
  name: 'callgate_rtp_discarded_packets_total',
  help: 'Packets the jitter buffer threw away, by reason (duplicate, overflow)',
  labelNames: ['reason'],
});
export const rtpConcealed = counter({ name: 'callgate_rtp_concealed_frames_total', help: 'Lost frames replaced by concealment' });
export const rtpJitter = histogram({
  name: 'callgate_rtp_jitter_seconds',
  help: 'Interarrival jitter of received streams (RFC 3550), sampled per RTCP interval',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32],
});
export const jitterUnderruns = counter({ name: 'callgate_rtp_receive_underruns_total', help: 'Ticks where the receive jitter buffer ran dry' });
export const playoutUnderruns = counter({ name: 'callgate_rtp_playout_underruns_total', help: 'Send ticks where model audio was not ready in time' });
export const playoutLateness = histogram({
  name: 'callgate_rtp_playout_lateness_seconds',
  help: 'How late each sent frame left against its 20 ms schedule',
  buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08],
});
export const playoutSkipped = counter({ name: 'callgate_rtp_playout_skipped_frames_total', help: 'Frames skipped after a stall longer than the catch-up allowance' });
export const dtmfEvents = counter<'direction' | 'source'>({
  name: 'callgate_dtmf_events_total',
  help: 'DTMF digits, by direction (in, out) and source (rtp, sip-info)',
  labelNames: ['direction', 'source'],
});
export const mediaTimeouts = counter({ name: 'callgate_rtp_media_timeouts_total', help: 'Calls ended because no RTP arrived for rtp.mediaTimeoutMs' });
export const rtpSessions = gauge({ name: 'callgate_rtp_sessions', help: 'Open RTP sessions' });
export const rtcpPackets = counter<'direction'>({ name: 'callgate_rtcp_packets_total', help: 'RTCP compound packets, by direction', labelNames: ['direction'] });
