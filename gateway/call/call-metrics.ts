/**
 * The call layer's metrics: how long a caller waits for the answer, how many calls are up, how
 * calls end, and how often a call had to re-open its model session. SIP-level counts (offered,
 * answered, responses by code) are gateway/sip's; commit-to-audible is result delivery's. The
 * histograms carry the call's session id as an exemplar (OpenMetrics scrapes).
 */
import { counter, gauge, histogram, FAST_SECONDS_BUCKETS } from '../../config/metrics.ts';

/** Calls last seconds to an hour; a call above the top bucket is a stuck one. */
const CALL_DURATION_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export const callMetrics = {
  setupSeconds: histogram({
    name: 'callgate_call_setup_seconds',
    help: 'From INVITE received to the call answered (media and model session opened while it rang, 200 sent), by tenant',
    labelNames: ['tenant'],
    buckets: FAST_SECONDS_BUCKETS,
    enableExemplars: true,
  }),
  modelReadySeconds: histogram({
    name: 'callgate_call_model_ready_seconds',
    help: 'From INVITE received to the model session configured, while the call rings (the answer follows), by tenant',
    labelNames: ['tenant'],
    buckets: FAST_SECONDS_BUCKETS,
    enableExemplars: true,
  }),
  active: gauge({
    name: 'callgate_calls_active',
    help: 'Answered calls not yet ended on this gateway, by tenant',
    labelNames: ['tenant'],
  }),
  refused: counter({
    name: 'callgate_calls_refused_total',
    help: 'Calls refused before the answer, by reason (draining, overloaded: event loop late, gateway_full: 503; tenant_full: 486; setup_failed, setup_timeout: media or model not open while it rang, 503)',
    labelNames: ['reason'],
  }),
  slotsAvailable: gauge({
    name: 'callgate_call_slots_available',
    help: 'gateway.maxCalls minus the calls this gateway holds (being set up or answered): what autoscaling reads',
  }),
  ended: counter({
    name: 'callgate_calls_ended_total',
    help: 'Calls ended, by tenant and reason (caller_hung_up, agent_hung_up, transferred, media_timeout, model_lost, shutdown, failed; rejected: refused before the answer)',
    labelNames: ['tenant', 'reason'],
  }),
  durationSeconds: histogram({
    name: 'callgate_call_duration_seconds',
    help: 'From the answer to the end of the call, by end reason',
    labelNames: ['reason'],
    buckets: CALL_DURATION_BUCKETS,
    enableExemplars: true,
  }),
  modelReopens: counter({
    name: 'callgate_call_model_reopens_total',
    help: 'Model sessions re-opened inside a call, by cause (lost: the connection dropped; expiring: the provider announced its session limit) and outcome (ok, failed)',
    labelNames: ['cause', 'outcome'],
  }),
  apologies: counter({
    name: 'callgate_call_apology_prompts_total',
    help: 'Apologies callgate played itself because the model was lost, by kind (reconnecting: while re-opening; goodbye: before hanging up) and audio (speech; silence: the prompt could not be rendered)',
    labelNames: ['kind', 'audio'],
  }),
};
