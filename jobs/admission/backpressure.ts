/**
 * Backpressure by policy (pure). The ledger counts an action's active operations atomically at
 * admission; these functions say how many are allowed and what a request gets when there is no room.
 *
 *   reject    room for maxConcurrent; beyond that an immediate "busy"
 *   queue     room for maxConcurrent + maxQueued; beyond that "busy" (queue full); a queued
 *             operation not started within admissionDeadlineMs is cancelled, never run late
 *   coalesce  (reads) identical requests share one running operation; room as for queue
 *   degrade   room as for queue; beyond that the declared fallback instead of the action
 */
import type { ActionConfig } from '../../config/schema.ts';

/** `not_durable`: admitted, but Redis could not make it durable, so it was taken back. */
export type BusyReason = 'at_capacity' | 'queue_full' | 'not_durable';

export type FullDecision =
  | { readonly type: 'busy'; readonly reason: BusyReason; readonly retryAfterMs: number }
  | { readonly type: 'degraded'; readonly fallback: string };

/** Most active operations (running and queued) the ledger admits for the action. */
export function capacityFor(
  action: Pick<ActionConfig, 'policy' | 'maxConcurrent' | 'maxQueued'>,
): number {
  return action.policy === 'reject'
    ? action.maxConcurrent
    : action.maxConcurrent + action.maxQueued;
}

/** What a request gets when the action has no room. */
export function decideWhenFull(
  action: Pick<ActionConfig, 'policy' | 'fallback' | 'admissionDeadlineMs'>,
): FullDecision {
  switch (action.policy) {
    case 'reject':
      return { type: 'busy', reason: 'at_capacity', retryAfterMs: action.admissionDeadlineMs };
    case 'degrade':
      // Config validation guarantees a fallback for degrade; an empty one would still be honest.
      return { type: 'degraded', fallback: action.fallback ?? '' };
    case 'queue':
    case 'coalesce':
      return { type: 'busy', reason: 'queue_full', retryAfterMs: action.admissionDeadlineMs };
  }
}

/** How admission recognises repeats for the action. */
export function admissionMode(
  action: Pick<ActionConfig, 'kind' | 'policy'>,
): 'mutation' | 'read' | 'coalesce' {
  if (action.kind === 'mutation') return 'mutation';
  return action.policy === 'coalesce' ? 'coalesce' : 'read';
}
