/**
 * Reconciliation: asks the provider what happened to an UNKNOWN operation, by our operation id
 * (and idempotency key), and moves the ledger to what the provider says. "Not found" is trusted
 * only after a grace period longer than the provider's own timeout, so a request still in flight
 * at the provider cannot commit after we decided it never happened.
 */
import type { Logger } from '../../config/log.ts';
import { operationsFinished, reconciliations, unknownResolved } from '../action-metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../ledger/ledger-errors.ts';
import { operationLogFields, type Operation, type OperationState } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import type { LookupResult, Provider } from '../providers/provider.ts';
import type { OperationQueues } from '../queues/operation-queues.ts';
import { errorJson, executionQueueOf } from './operation-executor.ts';

export type ReconcileOutcome =
  | { readonly type: 'resolved'; readonly state: OperationState }
  | { readonly type: 'again'; readonly delayMs: number; readonly reason: string }
  | { readonly type: 'stuck'; readonly reason: string };

export interface ReconcilerOptions {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly providers: ReadonlyMap<string, Provider>;
  readonly log: Logger;
  /** Minimum time after sending before "not found" is believed (above the provider timeout). */
  readonly graceMs: number;
  /** Backoff between lookups while the provider cannot say: base and cap. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly now?: () => number;
}

export class Reconciler {
  private readonly now: () => number;

  constructor(private readonly options: ReconcilerOptions) {
    this.now = options.now ?? Date.now;
  }

  async reconcile(tenantId: string, operationId: string, tries: number): Promise<ReconcileOutcome> {
    const { ledger } = this.options;
    const op = await ledger.get(tenantId, operationId);
    if (!op) return { type: 'stuck', reason: 'operation not found' };
    if (op.state !== 'UNKNOWN') return { type: 'resolved', state: op.state };
    const log = this.options.log.child(operationLogFields(op));
    const provider = this.options.providers.get(op.provider);
    if (!provider?.lookup || !provider.supportsLookup) {
      reconciliations.labels(op.action, 'no_lookup').inc();
      await ledger.setFenced(op, ['UNKNOWN'], undefined, { reconcile_stuck: '1' });
      log.error('operation stays UNKNOWN: its provider cannot look operations up', { provider: op.provider });
      return { type: 'stuck', reason: 'provider has no lookup' };
    }
    const sentAt = op.sendingAt ?? op.startedAt ?? op.createdAt;
    const trustNotFoundAt = sentAt + this.options.graceMs;
    let answer: LookupResult;
    try {
      answer = await provider.lookup({
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey,
        tenantId: op.tenantId,
        operation: op.providerOperation,
        signal: AbortSignal.timeout(this.options.maxBackoffMs),
      });
    } catch (error) {
      reconciliations.labels(op.action, 'error').inc();
      return this.again(tries, `lookup failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    const fields = { reconciled_at: String(this.now()) };
    switch (answer.status) {
      case 'committed': {
        const result: Record<string, string> = { ...fields, result: JSON.stringify(answer.result), committed_at: String(this.now()), error: '' };
        if (answer.providerRef !== undefined) result.provider_ref = answer.providerRef;
        return this.resolve(op, 'COMMITTED', 'reconciled_committed', result, 'committed', log);
      }
      case 'failed':
        return this.resolve(op, 'FAILED_FINAL', 'reconciled_failed', { ...fields, error: errorJson(answer.code, answer.message) }, 'failed', log);
      case 'cancelled':
        return this.resolve(op, 'CANCELLED', 'reconciled_cancelled', fields, 'cancelled', log);
      case 'unknown':
        reconciliations.labels(op.action, 'unknown').inc();
        return this.again(tries, answer.reason);
      case 'not_found': {
        const now = this.now();
        if (now < trustNotFoundAt) {
          reconciliations.labels(op.action, 'not_found_in_grace').inc();
          return { type: 'again', delayMs: trustNotFoundAt - now, reason: 'not found yet; still inside the grace period' };
        }
        // Nothing happened at the provider and nothing will: running it again is not blind.
        if (now >= op.deadlineAt) {
          return this.resolve(op, 'FAILED_FINAL', 'reconciled_not_found_after_deadline', { ...fields, error: errorJson('deadline', 'the provider never received it and the deadline passed') }, 'not_found', log);
        }
        const outcome = await this.resolve(op, 'FAILED_RETRYABLE', 'reconciled_not_found', { ...fields, last_outcome_unknown: '0' }, 'not_found', log);
        if (outcome.type === 'resolved') {
          await this.options.queues.requeueExecution(executionQueueOf(op), { operationId: op.operationId, tenantId: op.tenantId, action: op.action });
        }
        return outcome;
      }
    }
  }

  private again(tries: number, reason: string): ReconcileOutcome {
    const delayMs = Math.min(this.options.maxBackoffMs, this.options.backoffMs * 2 ** Math.min(tries, 16));
    return { type: 'again', delayMs, reason };
  }

  private async resolve(op: Operation, to: OperationState, reason: string, fields: Record<string, string>, outcome: string, log: Logger): Promise<ReconcileOutcome> {
    try {
      await this.options.ledger.transition(op, { from: ['UNKNOWN'], to, actor: 'reconciler', reason, fields });
    } catch (error) {
      if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) {
        const current = await this.options.ledger.get(op.tenantId, op.operationId);
        return { type: 'resolved', state: current?.state ?? op.state };
      }
      throw error;
    }
    reconciliations.labels(op.action, outcome).inc();
    unknownResolved.labels(op.action, outcome).inc();
    if (to === 'COMMITTED' || to === 'FAILED_FINAL' || to === 'CANCELLED') operationsFinished.labels(op.tenantId, op.action, to).inc();
    log.info('operation reconciled', { state: to, reason });
    return { type: 'resolved', state: to };
  }
}
