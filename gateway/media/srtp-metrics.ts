/**
 * SRTP drops, process-wide: counted as they happen (they are rare unless someone is forging or
 * replaying packets), by reason, apart from the per-session drop counts that also carry them.
 */
import { counter } from '../../config/metrics.ts';
import type { SrtpDropReason } from './srtp-transform.ts';

const srtpDropped = counter<'reason' | 'packet'>({
  name: 'callgate_rtp_srtp_dropped_total',
  help: 'Received SRTP/SRTCP packets dropped, never played nor sent to the model: srtp-auth (bad authentication tag), srtp-replay (an index already received or older than the replay window), srtp-unkeyed (no key of the far end yet, an MKI that names no key callgate was given, or SRTP unavailable), srtp-error (other libsrtp failures); packet is rtp or rtcp',
  labelNames: ['reason', 'packet'],
});

export function countSrtpDrop(reason: SrtpDropReason, packet: 'rtp' | 'rtcp'): void {
  srtpDropped.inc({ reason, packet });
}
