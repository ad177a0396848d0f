/** The SIP metrics, declared once on the shared registry. */
import { counter, gauge, histogram } from '../../config/metrics.ts';

/**
 * Setup-time buckets in seconds, 0.1 ms .. 5 s: finer than the shared fast buckets below 10 ms,
 * where INVITE-to-200 lives on a healthy gateway, so p50 and p99 read from them (dashboards,
 * bench/sip-bench.ts) are not just the bounds of one wide bucket.
 */
export const SIP_SETUP_SECONDS_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025,
  0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
];

export const sipMetrics = {
  callsOffered: counter({
    name: 'callgate_sip_calls_offered_total',
    help: 'INVITEs that started a new call attempt',
    labelNames: ['driver', 'transport'],
  }),
  callsAnswered: counter({
    name: 'callgate_sip_calls_answered_total',
    help: 'Calls answered with 200',
    labelNames: ['driver'],
  }),
  callsRejected: counter({
    name: 'callgate_sip_calls_rejected_total',
    help: 'Calls refused, by final status code',
    labelNames: ['driver', 'code'],
  }),
  setupSeconds: histogram({
    name: 'callgate_sip_setup_seconds',
    help: 'From INVITE received to 200 sent',
    labelNames: ['driver'],
    buckets: SIP_SETUP_SECONDS_BUCKETS,
  }),
  activeDialogs: gauge({
    name: 'callgate_sip_active_dialogs',
    help: 'Dialogs not yet terminated',
    labelNames: ['driver'],
  }),
  retransmissions: counter({
    name: 'callgate_sip_retransmissions_total',
    help: 'Messages sent again, and retransmitted requests absorbed',
    labelNames: ['direction'],
  }),
  parseFailures: counter({
    name: 'callgate_sip_parse_failures_total',
    help: 'Messages refused by the parser or the stream framer',
    labelNames: ['outcome'],
  }),
  authFailures: counter({
    name: 'callgate_sip_auth_failures_total',
    help: 'Requests refused by trunk security',
    labelNames: ['reason'],
  }),
  rateLimited: counter({
    name: 'callgate_sip_rate_limited_total',
    help: 'Requests refused or dropped by the per-source limits',
    labelNames: ['limit'],
  }),
  responses: counter({
    name: 'callgate_sip_responses_total',
    help: 'Final responses sent, by code',
    labelNames: ['code'],
  }),
  // ---- SIP over TLS ----
  tlsConnections: gauge({
    name: 'callgate_sip_tls_connections',
    help: 'TLS connections open with their handshake done (both directions)',
  }),
  tlsHandshakeFailures: counter({
    name: 'callgate_sip_tls_handshake_failures_total',
    help: 'TLS handshakes that failed, by direction and reason',
    labelNames: ['direction', 'reason'],
  }),
  tlsCertificateReloads: counter({
    name: 'callgate_sip_tls_certificate_reloads_total',
    help: 'Changed certificate and key files loaded, or refused and the pair in use kept',
    labelNames: ['outcome'],
  }),
};
