/**
 * Metrics of the durable action layer. The tenant label appears only where tenants are bounded by
 * configuration. docs/metrics.md holds the PromQL for UNKNOWN rate and retry rate. Admission,
 * execution-to-commit and UNKNOWN carry the operation (and its call) as an exemplar.
 */
import {
  counter,
  FAST_SECONDS_BUCKETS,
  gauge,
  histogram,
  SLOW_SECONDS_BUCKETS,
} from '../config/metrics.ts';

export const admissionDecisions = counter({
  name: 'callgate_admission_decisions_total',
  help: 'Admission decisions by tenant, action, policy and outcome (started, duplicate, coalesced, busy, degraded, conflict, invalid).',
  labelNames: ['tenant', 'action', 'policy', 'outcome'],
});

export const admissionLatency = histogram({
  name: 'callgate_admission_duration_seconds',
  help: 'Time to admit a request: validation and the ledger write, until the decision (the enqueue follows it; the outbox covers it).',
  labelNames: ['action'],
  buckets: FAST_SECONDS_BUCKETS,
  enableExemplars: true,
});

export const operationsFinished = counter({
  name: 'callgate_operations_total',
  help: 'Operations reaching a terminal state (COMMITTED, FAILED_FINAL, CANCELLED), by tenant and action.',
  labelNames: ['tenant', 'action', 'state'],
});

export const executionToCommit = histogram({
  name: 'callgate_operation_execution_to_commit_seconds',
  help: 'From the first attempt starting to the provider confirming the commit.',
  labelNames: ['action'],
  buckets: SLOW_SECONDS_BUCKETS,
  enableExemplars: true,
});

export const attempts = counter({
  name: 'callgate_operation_attempts_total',
  help: 'Provider attempts, first or retry.',
  labelNames: ['action', 'kind'],
});

export const retryBudgetExhausted = counter({
  name: 'callgate_retry_budget_exhausted_total',
  help: 'Retries refused because the action spent its retry budget.',
  labelNames: ['action'],
});

export const providerTimeouts = counter({
  name: 'callgate_provider_timeouts_total',
  help: 'Provider requests whose answer did not arrive in time (or was lost) after sending.',
  labelNames: ['action'],
});

export const duplicateSuppressions = counter({
  name: 'callgate_duplicate_suppressions_total',
  help: 'Requests answered with an existing operation instead of a new effect (duplicate by idempotency key, or a coalesced read).',
  labelNames: ['action', 'kind'],
});

export const unknownOpened = counter({
  name: 'callgate_unknown_opened_total',
  help: 'Operations that became UNKNOWN (the request may have reached the provider and the answer was lost).',
  labelNames: ['action'],
  enableExemplars: true,
});

export const unknownResolved = counter({
  name: 'callgate_unknown_resolved_total',
  help: 'UNKNOWN operations resolved by reconciliation, by outcome (committed, failed, not_found).',
  labelNames: ['action', 'outcome'],
});

export const unknownOpen = gauge({
  name: 'callgate_operations_unknown',
  help: 'Operations currently UNKNOWN, by tenant.',
  labelNames: ['tenant'],
});

export const unknownOldestAge = gauge({
  name: 'callgate_operations_unknown_oldest_age_seconds',
  help: 'Age of the oldest operation currently UNKNOWN, by tenant (0 when none).',
  labelNames: ['tenant'],
});

export const reconciliations = counter({
  name: 'callgate_reconciliations_total',
  help: 'Reconciliation lookups by outcome (committed, failed, not_found, unknown, no_lookup, error).',
  labelNames: ['action', 'outcome'],
});

export const cancellationsRequested = counter({
  name: 'callgate_cancellations_requested_total',
  help: 'Cancellations asked for, by the state the operation was in.',
  labelNames: ['action', 'state'],
});

export const cancellationsConfirmed = counter({
  name: 'callgate_cancellations_confirmed_total',
  help: 'Cancellations that took effect (before start, or confirmed by the provider).',
  labelNames: ['action', 'how'],
});

export const compensations = counter({
  name: 'callgate_compensations_total',
  help: 'Compensations (undos of committed operations) by compensating action and outcome: admitted, owed (could not be admitted yet; admitted later), committed, failed (ended without effect or refused: the original still stands).',
  labelNames: ['action', 'outcome'],
});

export const compensationsOwed = gauge({
  name: 'callgate_compensations_owed',
  help: 'Committed operations owed a compensation that is not admitted yet, per tenant.',
  labelNames: ['tenant'],
});

export const compensationOwedOldestAge = gauge({
  name: 'callgate_compensation_owed_oldest_age_seconds',
  help: 'How long the oldest owed compensation of the tenant has waited to be admitted (0 when none).',
  labelNames: ['tenant'],
});

export const queueJobs = gauge({
  name: 'callgate_queue_jobs',
  help: 'Jobs per queue and state (waiting, prioritized, delayed, active, failed).',
  labelNames: ['queue', 'state'],
});

export const outboxRecovered = counter({
  name: 'callgate_outbox_enqueued_total',
  help: 'Admitted operations the outbox sweep found without a job and enqueued.',
  labelNames: ['action'],
});

export const leaseDelays = counter({
  name: 'callgate_lease_delays_total',
  help: 'Jobs put back because their tenant had no free concurrency lease for the action.',
  labelNames: ['tenant', 'action'],
});

export const leasesLost = counter({
  name: 'callgate_leases_lost_total',
  help: 'Running attempts whose concurrency lease was gone at renewal (expired while the worker stalled): the action may have run above its limit.',
  labelNames: ['tenant', 'action'],
});

export const sendsRefused = counter({
  name: 'callgate_sends_refused_total',
  help: 'Attempts not sent to their provider: the sending mark was not durable in time (not_durable), or the lease expired before the send (lease_lost).',
  labelNames: ['action', 'reason'],
});

export const voids = counter({
  name: 'callgate_attempt_voids_total',
  help: 'Requests to providers to void earlier attempts before a resend, by outcome (voided, committed, processing, unknown, not_supported).',
  labelNames: ['action', 'outcome'],
});

export const actionActive = gauge({
  name: 'callgate_action_active_operations',
  help: 'Operations of an action admitted and not finished (running, queued or waiting to retry): its queue depth.',
  labelNames: ['tenant', 'action'],
});

export const actionLeases = gauge({
  name: 'callgate_action_leases_in_use',
  help: 'Concurrency leases held for an action: requests at the provider right now, including timed-out ones whose outcome is not settled yet.',
  labelNames: ['tenant', 'action'],
});

export const actionMaxConcurrent = gauge({
  name: 'callgate_action_max_concurrent',
  help: 'Configured concurrency limit of an action (leases in use / this = worker utilisation of the action).',
  labelNames: ['tenant', 'action'],
});
