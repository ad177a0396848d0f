/**
 * Process-wide media metrics (all calls together); each RtpSession keeps its own counts in
 * `stats()` and adds them here. Per-call numbers stay out of Prometheus labels: a label per call
 * would be unbounded cardinality.
 */
import type { Histogram } from 'prom-client';
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
/** Upper bounds of the playout lateness buckets, in seconds (an implicit +Inf bucket follows). */
export const PLAYOUT_LATENESS_BUCKETS: readonly number[] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08];
export const playoutLateness = histogram({
  name: 'callgate_rtp_playout_lateness_seconds',
  help: 'How late each sent frame left against its 20 ms schedule',
  buckets: [...PLAYOUT_LATENESS_BUCKETS],
});

/** Index of the bucket a value falls in (PLAYOUT_LATENESS_BUCKETS.length: above the last bound). */
export function latenessBucket(seconds: number): number {
  let i = 0;
  while (i < PLAYOUT_LATENESS_BUCKETS.length && seconds > (PLAYOUT_LATENESS_BUCKETS[i] as number)) i++;
  return i;
}

interface HistogramSeries {
  sum: number;
  count: number;
  bucketValues: Record<string, number>;
}

/**
 * Adds many observations to a label-less histogram at once: `counts[i]` values in bucket i (as
 * `latenessBucket` numbers them) summing to `sum`. prom-client only has observe() per value, and
 * at a thousand calls one observe() per sent frame costs a few per cent of a core on the send path;
 * sessions count per bucket and add once a second instead. This updates the series the way
 * observe() does in prom-client 15 (non-cumulative bucket counts, sum, count); if that shape ever
 * changes it falls back to one observe() per value at its bucket's upper bound.
 */
export function addObservations(target: Histogram, bounds: readonly number[], counts: ArrayLike<number>, sum: number): void {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] as number;
  if (total === 0) return;
  // One real observe() creates the series if needed and keeps prom-client's own bookkeeping right.
  const first = firstNonEmpty(counts);
  const firstValue = (bounds[first]) ?? (bounds[bounds.length - 1] as number) * 2;
  target.observe(firstValue);
  const series = (target as unknown as { hashMap?: Record<string, HistogramSeries | undefined> }).hashMap?.[''];
  if (series === undefined || typeof series.sum !== 'number' || typeof series.bucketValues !== 'object') {
    for (let i = 0; i < counts.length; i++) {
      for (let n = i === first ? 1 : 0; n < (counts[i] as number); n++) target.observe((bounds[i]) ?? firstValue);
    }
    return;
  }
  series.sum += sum - firstValue;
  series.count += total - 1;
  for (let i = 0; i < bounds.length; i++) {
    const extra = (counts[i] as number) - (i === first ? 1 : 0);
    const key = String(bounds[i]);
    if (extra > 0 && Object.prototype.hasOwnProperty.call(series.bucketValues, key)) series.bucketValues[key] = (series.bucketValues[key] as number) + extra;
  }
}

function firstNonEmpty(counts: ArrayLike<number>): number {
  for (let i = 0; i < counts.length; i++) if ((counts[i] as number) > 0) return i;
  return 0;
}
export const playoutSkipped = counter({ name: 'callgate_rtp_playout_skipped_frames_total', help: 'Frames skipped after a stall longer than the catch-up allowance' });
export const dtmfEvents = counter<'direction' | 'source'>({
  name: 'callgate_dtmf_events_total',
  help: 'DTMF digits, by direction (in, out) and source (rtp, sip-info)',
  labelNames: ['direction', 'source'],
});
export const mediaTimeouts = counter({ name: 'callgate_rtp_media_timeouts_total', help: 'Calls ended because no RTP arrived for rtp.mediaTimeoutMs' });
export const rtpSessions = gauge({ name: 'callgate_rtp_sessions', help: 'Open RTP sessions' });
export const rtcpPackets = counter<'direction'>({ name: 'callgate_rtcp_packets_total', help: 'RTCP compound packets, by direction', labelNames: ['direction'] });
