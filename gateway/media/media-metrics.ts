/**
 * Process-wide media metrics (all calls together); each RtpSession keeps its own counts in
 * `stats()` and adds them here. Per-call numbers stay out of Prometheus labels: a label per call
 * would be unbounded cardinality.
 *
 * Sessions add what they counted once a second to plain sums (`addMediaCounts`, `addDrops`,
 * `addLateness`); prom-client gets the sums when the metrics are read, through each metric's
 * collect(). A thousand calls cost one set of prom-client updates per scrape instead of a
 * thousand a second (label lookups and histogram bookkeeping cost about 10 µs per session flush).
 */
import type { Histogram } from 'prom-client';
import { counter, gauge, histogram } from '../../config/metrics.ts';
import type { RtpSessionDropReason } from './rtp-session-stats.ts';

/** Counts a session adds to the process metrics (differences since its last flush). */
export interface MediaCounts {
  packetsIn: number;
  bytesIn: number;
  packetsOut: number;
  bytesOut: number;
  lost: number;
  late: number;
  duplicates: number;
  discarded: number;
  hurried: number;
  concealed: number;
  underruns: number;
  playoutUnderruns: number;
  skipped: number;
  rtcpIn: number;
  rtcpOut: number;
}

export function emptyMediaCounts(): MediaCounts {
  return {
    packetsIn: 0,
    bytesIn: 0,
    packetsOut: 0,
    bytesOut: 0,
    lost: 0,
    late: 0,
    duplicates: 0,
    discarded: 0,
    hurried: 0,
    concealed: 0,
    underruns: 0,
    playoutUnderruns: 0,
    skipped: 0,
    rtcpIn: 0,
    rtcpOut: 0,
  };
}

/** What sessions added and prom-client has not seen yet. */
const unpublished = emptyMediaCounts();
const unpublishedDrops: Partial<Record<RtpSessionDropReason, number>> = {};
let dropsPending = false;

export const rtpPackets = counter<'direction'>({
  name: 'callgate_rtp_packets_total',
  help: 'RTP packets, by direction (in, out)',
  labelNames: ['direction'],
  collect: publishMediaCounts,
});
export const rtpBytes = counter<'direction'>({
  name: 'callgate_rtp_bytes_total',
  help: 'RTP bytes (whole datagrams), by direction',
  labelNames: ['direction'],
  collect: publishMediaCounts,
});
export const rtpDropped = counter<'reason'>({
  name: 'callgate_rtp_dropped_packets_total',
  help: 'Received RTP/RTCP datagrams dropped before the jitter buffer, by reason',
  labelNames: ['reason'],
  collect: publishMediaCounts,
});
export const rtpLost = counter({
  name: 'callgate_rtp_lost_packets_total',
  help: 'Received frames missing at playout time (sequence gaps)',
  collect: publishMediaCounts,
});
export const rtpLate = counter({
  name: 'callgate_rtp_late_packets_total',
  help: 'Packets that arrived after their playout slot',
  collect: publishMediaCounts,
});
export const rtpDiscarded = counter<'reason'>({
  name: 'callgate_rtp_discarded_packets_total',
  help: 'Packets the jitter buffer threw away, by reason (duplicate, overflow)',
  labelNames: ['reason'],
  collect: publishMediaCounts,
});
export const rtpConcealed = counter({
  name: 'callgate_rtp_concealed_frames_total',
  help: 'Lost frames replaced by concealment',
  collect: publishMediaCounts,
});
export const rtpHurried = counter({
  name: 'callgate_rtp_hurried_frames_total',
  help: 'Caller frames handed to the model ahead of their slot to bring the receive jitter buffer back to its target depth (after a burst)',
  collect: publishMediaCounts,
});
export const rtpJitter = histogram({
  name: 'callgate_rtp_jitter_seconds',
  help: 'Interarrival jitter of received streams (RFC 3550), sampled per RTCP interval',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32],
});
export const jitterUnderruns = counter({
  name: 'callgate_rtp_receive_underruns_total',
  help: 'Ticks where the receive jitter buffer ran dry because a packet came late (not pauses between talk spurts, not lost packets)',
  collect: publishMediaCounts,
});
export const playoutUnderruns = counter({
  name: 'callgate_rtp_playout_underruns_total',
  help: 'Send ticks where model audio was not ready in time',
  collect: publishMediaCounts,
});
/** Upper bounds of the playout lateness buckets, in seconds (an implicit +Inf bucket follows). */
export const PLAYOUT_LATENESS_BUCKETS: readonly number[] = [
  0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08,
];
export const playoutLateness = histogram({
  name: 'callgate_rtp_playout_lateness_seconds',
  help: 'How late each sent frame left against its 20 ms schedule',
  buckets: [...PLAYOUT_LATENESS_BUCKETS],
  collect: publishMediaCounts,
});
/** Sent frames per lateness bucket (as `latenessBucket` numbers them) and their summed lateness in seconds, not yet in prom-client. */
const unpublishedLateness = new Float64Array(PLAYOUT_LATENESS_BUCKETS.length + 1);
let unpublishedLatenessSum = 0;

/** Index of the bucket a value falls in (PLAYOUT_LATENESS_BUCKETS.length: above the last bound). */
export function latenessBucket(seconds: number): number {
  let i = 0;
  while (i < PLAYOUT_LATENESS_BUCKETS.length && seconds > (PLAYOUT_LATENESS_BUCKETS[i] as number))
    i++;
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
export function addObservations(
  target: Histogram,
  bounds: readonly number[],
  counts: ArrayLike<number>,
  sum: number,
): void {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] as number;
  if (total === 0) return;
  // One real observe() creates the series if needed and keeps prom-client's own bookkeeping right.
  const first = firstNonEmpty(counts);
  const firstValue = bounds[first] ?? (bounds[bounds.length - 1] as number) * 2;
  target.observe(firstValue);
  const series = (target as unknown as { hashMap?: Record<string, HistogramSeries | undefined> })
    .hashMap?.[''];
  if (
    series === undefined ||
    typeof series.sum !== 'number' ||
    typeof series.bucketValues !== 'object'
  ) {
    for (let i = 0; i < counts.length; i++) {
      for (let n = i === first ? 1 : 0; n < (counts[i] as number); n++)
        target.observe(bounds[i] ?? firstValue);
    }
    return;
  }
  series.sum += sum - firstValue;
  series.count += total - 1;
  for (let i = 0; i < bounds.length; i++) {
    const extra = (counts[i] as number) - (i === first ? 1 : 0);
    const key = String(bounds[i]);
    if (extra > 0 && Object.prototype.hasOwnProperty.call(series.bucketValues, key))
      series.bucketValues[key] = (series.bucketValues[key] as number) + extra;
  }
}

function firstNonEmpty(counts: ArrayLike<number>): number {
  for (let i = 0; i < counts.length; i++) if ((counts[i] as number) > 0) return i;
  return 0;
}
export const playoutSkipped = counter({
  name: 'callgate_rtp_playout_skipped_frames_total',
  help: 'Frames skipped after a stall longer than the catch-up allowance',
  collect: publishMediaCounts,
});
export const dtmfEvents = counter<'direction' | 'source'>({
  name: 'callgate_dtmf_events_total',
  help: 'DTMF digits, by direction (in, out) and source (rtp, sip-info)',
  labelNames: ['direction', 'source'],
});
export const mediaTimeouts = counter({
  name: 'callgate_rtp_media_timeouts_total',
  help: 'Calls ended because no RTP arrived for rtp.mediaTimeoutMs',
});
export const rtpSessions = gauge({ name: 'callgate_rtp_sessions', help: 'Open RTP sessions' });
export const rtpSessionsOpened = counter({
  name: 'callgate_rtp_sessions_opened_total',
  help: 'RTP sessions opened (a port pair bound for a call); their rate is calls reaching media setup',
});
export const rtpSocketErrors = counter({
  name: 'callgate_rtp_socket_errors_total',
  help: 'Errors on media sockets after binding: RTP sends the kernel refused (a full send buffer, no route; seen on the native sockets only, dgram drops them unseen), failed lookups of a host name to send to, and RTCP socket errors; such a packet is lost',
});
export const rtpSocketsInfo = gauge<'engine'>({
  name: 'callgate_rtp_sockets_info',
  help: "The RTP sockets in use (rtp.sockets): engine native (callgate's module) or node (dgram); always 1",
  labelNames: ['engine'],
});
export const rtcpPackets = counter<'direction'>({
  name: 'callgate_rtcp_packets_total',
  help: 'RTCP compound packets, by direction',
  labelNames: ['direction'],
  collect: publishMediaCounts,
});

/** A session's counts since its last flush (`current - flushed`, field by field) join the unpublished sums. */
export function addMediaCounts(current: MediaCounts, flushed: MediaCounts): void {
  const u = unpublished;
  u.packetsIn += current.packetsIn - flushed.packetsIn;
  u.bytesIn += current.bytesIn - flushed.bytesIn;
  u.packetsOut += current.packetsOut - flushed.packetsOut;
  u.bytesOut += current.bytesOut - flushed.bytesOut;
  u.lost += current.lost - flushed.lost;
  u.late += current.late - flushed.late;
  u.duplicates += current.duplicates - flushed.duplicates;
  u.discarded += current.discarded - flushed.discarded;
  u.hurried += current.hurried - flushed.hurried;
  u.concealed += current.concealed - flushed.concealed;
  u.underruns += current.underruns - flushed.underruns;
  u.playoutUnderruns += current.playoutUnderruns - flushed.playoutUnderruns;
  u.skipped += current.skipped - flushed.skipped;
  u.rtcpIn += current.rtcpIn - flushed.rtcpIn;
  u.rtcpOut += current.rtcpOut - flushed.rtcpOut;
}

export function addDrops(reason: RtpSessionDropReason, count: number): void {
  if (count <= 0) return;
  unpublishedDrops[reason] = (unpublishedDrops[reason] ?? 0) + count;
  dropsPending = true;
}

/** Sent frames per lateness bucket and their summed lateness (seconds), for the playout lateness histogram. */
export function addLateness(counts: ArrayLike<number>, sumSeconds: number): void {
  for (let i = 0; i < counts.length && i < unpublishedLateness.length; i++)
    unpublishedLateness[i] = (unpublishedLateness[i] as number) + (counts[i] as number);
  unpublishedLatenessSum += sumSeconds;
}

/**
 * Moves everything sessions added into prom-client. Every media metric calls it when read, so a
 * scrape (or a test's `get()`) sees all that sessions flushed; the second call of a scrape finds
 * nothing left and costs nothing.
 */
export function publishMediaCounts(): void {
  const u = unpublished;
  if (u.packetsIn > 0) rtpPackets.inc({ direction: 'in' }, u.packetsIn);
  if (u.bytesIn > 0) rtpBytes.inc({ direction: 'in' }, u.bytesIn);
  if (u.packetsOut > 0) rtpPackets.inc({ direction: 'out' }, u.packetsOut);
  if (u.bytesOut > 0) rtpBytes.inc({ direction: 'out' }, u.bytesOut);
  if (u.lost > 0) rtpLost.inc(u.lost);
  if (u.late > 0) rtpLate.inc(u.late);
  if (u.duplicates > 0) rtpDiscarded.inc({ reason: 'duplicate' }, u.duplicates);
  if (u.discarded > 0) rtpDiscarded.inc({ reason: 'overflow' }, u.discarded);
  if (u.concealed > 0) rtpConcealed.inc(u.concealed);
  if (u.hurried > 0) rtpHurried.inc(u.hurried);
  if (u.underruns > 0) jitterUnderruns.inc(u.underruns);
  if (u.playoutUnderruns > 0) playoutUnderruns.inc(u.playoutUnderruns);
  if (u.skipped > 0) playoutSkipped.inc(u.skipped);
  if (u.rtcpIn > 0) rtcpPackets.inc({ direction: 'in' }, u.rtcpIn);
  if (u.rtcpOut > 0) rtcpPackets.inc({ direction: 'out' }, u.rtcpOut);
  Object.assign(u, emptyMediaCounts());
  if (dropsPending) {
    for (const [reason, count] of Object.entries(unpublishedDrops) as Array<
      [RtpSessionDropReason, number]
    >)
      if (count > 0) rtpDropped.inc({ reason }, count);
    for (const reason of Object.keys(unpublishedDrops) as RtpSessionDropReason[])
      delete unpublishedDrops[reason];
    dropsPending = false;
  }
  addObservations(
    playoutLateness,
    PLAYOUT_LATENESS_BUCKETS,
    unpublishedLateness,
    unpublishedLatenessSum,
  );
  unpublishedLateness.fill(0);
  unpublishedLatenessSum = 0;
}
