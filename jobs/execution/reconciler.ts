/**
 * Reconciliation: asks the provider what happened to an UNKNOWN operation, by our operation id
 * (and idempotency key), and moves the ledger to what the provider says. Every move is fenced by
 * the attempt (and its token) the lookup was about: an answer about an attempt that is no longer
 * the current one is refused, and the operation is looked at again.
 *
 * "Not found" turns into a resend only when no earlier request can still take effect: after a grace
 * period longer than the provider's timeout, and, for a provider without idempotency keys, once the
 * provider has voided every earlier attempt's token (a request held by a proxy or a paused worker is
 * then refused when it arrives). A provider that cannot void keeps the operation UNKNOWN for an
 * operator. The resend is a new attempt like any retry: counted against the attempts, the backoff
 * and the retry budget.
 */
import type { ActionConfig } from '../../config/schema.ts';
import type { Logger } from '../../config/log.ts';
import {
  operationsFinished,
  reconciliations,
  retryBudgetExhausted,
  unknownResolved,
  voids,
} from '../action-metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../ledger/ledger-errors.ts';
import { leaseHolder } from '../ledger/keys.ts';
import { operationLogFields, type Operation, type OperationState } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import { callContextOf, type LookupResult, type Provider } from '../providers/provider.ts';
import type { OperationQueues } from '../queues/operation-queues.ts';
import { errorJson, executionQueueOf } from './operation-executor.ts';
import { decideRetry } from './retry-policy.ts';

export type ReconcileOutcome =
  | { readonly type: 'resolved'; readonly state: OperationState }
  | { readonly type: 'again'; readonly delayMs: number; readonly reason: string }
  | { readonly type: 'stuck'; readonly reason: string };

export interface ReconcilerOptions {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly providers: ReadonlyMap<string, Provider>;
  /** Action configuration of a tenant's action (its retry policy for a resend). */
  readonly actionConfig: (tenantId: string, action: string) => ActionConfig | undefined;
  readonly log: Logger;
  /** Minimum time after sending before "not found" is believed (above the provider timeout). */
  readonly graceMs: number;
  /** Backoff between lookups while the provider cannot say: base and cap. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly random?: () => number;
}

/** Why an operation stays UNKNOWN until an operator acts (the reconcile_stuck field; docs/runbook.md). */
export type StuckReason = 'no_lookup' | 'not_found_cannot_void';

export class Reconciler {
  private readonly random: () => number;

  constructor(private readonly options: ReconcilerOptions) {
    this.random = options.random ?? Math.random;
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
      return this.stuck(op, 'no_lookup', 'its provider cannot look operations up', log);
    }
    let answer: LookupResult;
    try {
      answer = await provider.lookup({
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey,
        tenantId: op.tenantId,
        operation: op.providerOperation,
        call: callContextOf(op),
        signal: AbortSignal.timeout(this.options.maxBackoffMs),
      });
    } catch (error) {
      reconciliations.labels(op.action, 'error').inc();
      await this.keepLeases(op, provider);
      return this.again(
        tries,
        `lookup failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const fields = { reconciled_at: String(Date.now()) };
    switch (answer.status) {
      case 'committed':
        return this.committed(op, answer, log);
      case 'failed':
        return this.resolve(
          op,
          'FAILED_FINAL',
          'reconciled_failed',
          { ...fields, error: errorJson(answer.code, answer.message) },
          'failed',
          log,
        );
      case 'cancelled':
        return this.resolve(op, 'CANCELLED', 'reconciled_cancelled', fields, 'cancelled', log);
      case 'unknown':
        reconciliations.labels(op.action, 'unknown').inc();
        // A request the provider is still working on, or one that cannot be ruled out while the
        // provider cannot say, keeps its attempt's lease a while longer.
        await this.keepLeases(op, provider);
        return this.again(tries, answer.reason);
      case 'not_found':
        return this.notFound(op, provider, tries, log);
    }
  }

  /**
   * The provider has no record. Believed once the grace after the last send has passed and, where a
   * resend could be a second effect, once the provider has voided every earlier attempt.
   */
  private async notFound(
    op: Operation,
    provider: Provider,
    tries: number,
    log: Logger,
  ): Promise<ReconcileOutcome> {
    const { ledger } = this.options;
    const now = await ledger.time();
    const sentAt = op.sendingAt ?? op.startedAt ?? op.createdAt;
    const trustNotFoundAt = sentAt + this.options.graceMs;
    if (now < trustNotFoundAt) {
      reconciliations.labels(op.action, 'not_found_in_grace').inc();
      // Not ruled out yet: the lease outlasts the look at the end of the grace, however late it runs.
      await this.keepLeases(op, provider);
      return {
        type: 'again',
        delayMs: trustNotFoundAt - now,
        reason: 'not found yet; still inside the grace period',
      };
    }
    // Void whatever can be voided: also with idempotency keys, a request still on its way would
    // otherwise take effect after the operation was given up as never received.
    const voidable = provider.supportsVoid && provider.voidAttempts !== undefined;
    if (!voidable && !op.providerIdempotent) return this.cannotVoid(op, log);
    if (voidable && provider.voidAttempts) {
      const voided = await provider.voidAttempts({
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey,
        tenantId: op.tenantId,
        operation: op.providerOperation,
        call: callContextOf(op),
        attemptTokens: op.attemptTokens,
        signal: AbortSignal.timeout(this.options.maxBackoffMs),
      });
      voids.labels(op.action, voided.status).inc();
      switch (voided.status) {
        case 'committed':
          return this.committed(op, voided, log);
        case 'processing':
          await this.keepLeases(op, provider);
          return this.again(tries, 'an earlier attempt is being processed by the provider');
        case 'unknown':
          await this.keepLeases(op, provider);
          return this.again(tries, `void failed: ${voided.reason}`);
        case 'voided':
          break;
      }
    }
    // A resend is a new attempt (with the same key where the provider dedupes). Without a void, an
    // earlier request may still take effect: the operation stays uncertain.
    const fields = {
      reconciled_at: String(Date.now()),
      last_outcome_unknown: '0',
      uncertain: voidable ? '0' : op.uncertain ? '1' : '0',
    };
    const action = this.options.actionConfig(op.tenantId, op.action);
    const decision =
      action === undefined
        ? undefined
        : decideRetry(action.retry, op.sentAttempts, now, op.deadlineAt, this.random);
    let reason =
      decision === undefined
        ? 'action_not_configured'
        : decision.retry
          ? undefined
          : decision.reason;
    if (action !== undefined && decision?.retry === true) {
      const budget = await ledger.spendRetry(op, {
        windowMs: action.retry.budgetWindowSeconds * 1000,
        ratio: action.retry.budgetRatio,
        minimum: action.retry.budgetMinRetries,
      });
      if (!budget.allowed) {
        retryBudgetExhausted.labels(op.action).inc();
        reason = 'retry_budget_exhausted';
      }
    }
    if (reason !== undefined || decision?.retry !== true) {
      // Giving up says the provider never received it: true only once nothing can still arrive.
      if (!voidable) return this.cannotVoid(op, log);
      const why = reason ?? 'no_retry';
      return this.resolve(
        op,
        'FAILED_FINAL',
        why === 'deadline' ? 'reconciled_not_found_after_deadline' : `reconciled_not_found_${why}`,
        {
          ...fields,
          error: errorJson(why, 'the provider never received it and no attempt may be sent again'),
        },
        'not_found',
        log,
      );
    }
    const outcome = await this.resolve(
      op,
      'FAILED_RETRYABLE',
      'reconciled_not_found',
      fields,
      'not_found',
      log,
    );
    if (outcome.type === 'resolved' && outcome.state === 'FAILED_RETRYABLE') {
      await this.options.queues.requeueExecution(
        executionQueueOf(op),
        { operationId: op.operationId, tenantId: op.tenantId, action: op.action },
        decision.delayMs,
      );
    }
    return outcome;
  }

  /** "Not found", and no void: a request still on its way could take effect later. Left for an operator. */
  private cannotVoid(op: Operation, log: Logger): Promise<ReconcileOutcome> {
    voids.labels(op.action, 'not_supported').inc();
    reconciliations.labels(op.action, 'not_found_cannot_void').inc();
    const why = op.providerIdempotent
      ? 'its provider has no record of it, no attempt may be sent again, and it cannot void the earlier attempts, so a request still on its way could take effect'
      : 'its provider has no record of it but cannot void the earlier attempts, so a request still on its way could take effect after a resend';
    return this.stuck(op, 'not_found_cannot_void', why, log);
  }

  private committed(
    op: Operation,
    answer: { readonly result: Readonly<Record<string, unknown>>; readonly providerRef?: string },
    log: Logger,
  ): Promise<ReconcileOutcome> {
    const fields: Record<string, string> = {
      reconciled_at: String(Date.now()),
      result: JSON.stringify(answer.result),
      committed_at: String(Date.now()),
      error: '',
    };
    if (answer.providerRef !== undefined) fields.provider_ref = answer.providerRef;
    return this.resolve(op, 'COMMITTED', 'reconciled_committed', fields, 'committed', log);
  }

  /**
   * A request of the operation may still be in progress or on its way (the provider says it is
   * processing, or could not be asked or could not void): the attempts' leases that are still held
   * are kept for another provider timeout plus grace, so the action's concurrency at the provider
   * still counts it (a lease already gone is not taken again).
   */
  private async keepLeases(op: Operation, provider: Provider): Promise<void> {
    const until = (await this.options.ledger.time()) + provider.timeoutMs + this.options.graceMs;
    for (let attempt = 1; attempt <= op.attempt; attempt++) {
      await this.options.ledger.parkLease(
        op.tenantId,
        op.action,
        leaseHolder(op.operationId, attempt),
        until,
      );
    }
  }

  /** Left UNKNOWN for an operator: marked (fenced by attempt), logged, alerted on (docs/runbook.md). */
  private async stuck(
    op: Operation,
    reason: StuckReason,
    why: string,
    log: Logger,
  ): Promise<ReconcileOutcome> {
    try {
      await this.options.ledger.setFenced(op, ['UNKNOWN'], op.attempt, {
        reconcile_stuck: '1',
        reconcile_stuck_reason: reason,
      });
    } catch (error) {
      if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError)
        return { type: 'again', delayMs: 0, reason: 'the operation moved meanwhile' };
      throw error;
    }
    log.error(`operation stays UNKNOWN until an operator reconciles it: ${why}`, {
      provider: op.provider,
      reason,
    });
    return { type: 'stuck', reason: why };
  }

  private again(tries: number, reason: string): ReconcileOutcome {
    const delayMs = Math.min(
      this.options.maxBackoffMs,
      this.options.backoffMs * 2 ** Math.min(tries, 16),
    );
    return { type: 'again', delayMs, reason };
  }

  /**
   * Moves the UNKNOWN operation, fenced by the attempt (and token) that was looked up; the attempts'
   * leases are settled with it. A stale answer (another attempt began meanwhile) is refused and the
   * operation looked at again.
   */
  private async resolve(
    op: Operation,
    to: OperationState,
    reason: string,
    fields: Record<string, string>,
    outcome: string,
    log: Logger,
  ): Promise<ReconcileOutcome> {
    try {
      await this.options.ledger.transition(op, {
        from: ['UNKNOWN'],
        to,
        attempt: op.attempt,
        token: op.attemptToken,
        actor: 'reconciler',
        reason,
        fields,
        lease: { mode: 'settle' },
      });
    } catch (error) {
      if (error instanceof StaleAttemptError) {
        reconciliations.labels(op.action, 'stale').inc();
        log.warn('reconcile answer refused: another attempt began meanwhile; looking again', {
          attempt: op.attempt,
        });
        return { type: 'again', delayMs: 0, reason: 'stale: another attempt began meanwhile' };
      }
      if (error instanceof IllegalTransitionError) {
        const current = await this.options.ledger.get(op.tenantId, op.operationId);
        return { type: 'resolved', state: current?.state ?? op.state };
      }
      throw error;
    }
    reconciliations.labels(op.action, outcome).inc();
    unknownResolved.labels(op.action, outcome).inc();
    if (to === 'COMMITTED' || to === 'FAILED_FINAL' || to === 'CANCELLED')
      operationsFinished.labels(op.tenantId, op.action, to).inc();
    log.info('operation reconciled', { state: to, reason });
    return { type: 'resolved', state: to };
  }
}
