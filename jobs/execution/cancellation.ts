/**
 * Cancelling a business action, which is not cancelling speech. What "cancel" can honestly mean
 * depends on where the operation is:
 *
 *   ADMITTED (queued)            -> CANCELLED now; the provider is never called
 *   FAILED_RETRYABLE, definite   -> CANCELLED now (the last attempt certainly had no effect)
 *   RUNNING, provider can cancel -> requested; CANCELLED only when the provider confirms
 *   RUNNING, provider cannot     -> stays RUNNING, and the caller of cancel is told so
 *   UNKNOWN                      -> reconcile first; nothing is claimed
 *   COMMITTED                    -> too late: undoing it is a compensation operation
 *
 * "Cancelled" is never reported because a local await was abandoned. "Requested" means a cancel
 * job will ask the provider: a call that fails is retried with backoff (operation-queues.ts), and a
 * new request replaces a cancel job that already gave up.
 */
import type { Logger } from '../../config/log.ts';
import {
  cancellationsConfirmed,
  cancellationsRequested,
  operationsFinished,
} from '../action-metrics.ts';
import {
  IllegalTransitionError,
  OperationNotFoundError,
  StaleAttemptError,
} from '../ledger/ledger-errors.ts';
import { operationLogFields, type Operation, type OperationState } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import { callContextOf, type CancelResult, type Provider } from '../providers/provider.ts';
import type { OperationQueues } from '../queues/operation-queues.ts';
import { executionQueueOf } from './operation-executor.ts';

export type CancelDecision =
  | { readonly type: 'cancelled'; readonly operationId: string }
  | { readonly type: 'requested'; readonly operationId: string }
  | {
      readonly type: 'not_cancellable';
      readonly operationId: string;
      readonly state: OperationState;
      readonly reason: 'running_without_cancel' | 'unknown_reconcile_first';
    }
  | {
      readonly type: 'committed';
      readonly operationId: string;
      readonly result?: Readonly<Record<string, unknown>>;
    }
  | {
      readonly type: 'already_final';
      readonly operationId: string;
      readonly state: OperationState;
    };

export interface CancellationOptions {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  /** Provider declarations: whether a request in progress can be cancelled. */
  readonly providers: ReadonlyMap<string, Pick<Provider, 'supportsCancel'>>;
}

export class Cancellation {
  constructor(private readonly options: CancellationOptions) {}

  async request(tenantId: string, operationId: string): Promise<CancelDecision> {
    const { ledger } = this.options;
    // Two tries: a worker may start the operation between our read and our compare-and-set.
    for (let round = 0; round < 2; round++) {
      const op = await ledger.get(tenantId, operationId);
      if (!op) throw new OperationNotFoundError(operationId);
      if (round === 0) cancellationsRequested.labels(op.action, op.state).inc();
      try {
        const decision = await this.decide(op);
        if (decision) return decision;
      } catch (error) {
        if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) continue;
        throw error;
      }
    }
    const op = await ledger.require(tenantId, operationId);
    return {
      type: 'not_cancellable',
      operationId,
      state: op.state,
      reason: 'running_without_cancel',
    };
  }

  private async decide(op: Operation): Promise<CancelDecision | undefined> {
    const { ledger, queues } = this.options;
    const id = op.operationId;
    switch (op.state) {
      case 'REQUESTED':
      case 'ADMITTED':
        await ledger.transition(op, {
          from: ['ADMITTED'],
          to: 'CANCELLED',
          actor: 'canceller',
          reason: 'cancelled_before_start',
        });
        await queues.removeWaitingExecution(executionQueueOf(op), id);
        cancellationsConfirmed.labels(op.action, 'before_start').inc();
        operationsFinished.labels(op.tenantId, op.action, 'CANCELLED').inc();
        return { type: 'cancelled', operationId: id };
      case 'FAILED_RETRYABLE': {
        // A failure whose outcome was unknown may have committed at the provider: treat it as running.
        if (!(await this.lastOutcomeUnknown(op))) {
          await ledger.transition(op, {
            from: ['FAILED_RETRYABLE'],
            to: 'CANCELLED',
            attempt: op.attempt,
            actor: 'canceller',
            reason: 'cancelled_between_attempts',
          });
          await queues.removeWaitingExecution(executionQueueOf(op), id);
          cancellationsConfirmed.labels(op.action, 'between_attempts').inc();
          operationsFinished.labels(op.tenantId, op.action, 'CANCELLED').inc();
          return { type: 'cancelled', operationId: id };
        }
        return this.cancelInProgress(op);
      }
      case 'RUNNING':
        return this.cancelInProgress(op);
      case 'UNKNOWN':
        return {
          type: 'not_cancellable',
          operationId: id,
          state: op.state,
          reason: 'unknown_reconcile_first',
        };
      case 'COMMITTED':
        return { type: 'committed', operationId: id, result: op.result };
      case 'FAILED_FINAL':
      case 'CANCELLED':
        return { type: 'already_final', operationId: id, state: op.state };
    }
  }

  private async cancelInProgress(op: Operation): Promise<CancelDecision> {
    const provider = this.options.providers.get(op.provider);
    if (!provider?.supportsCancel) {
      return {
        type: 'not_cancellable',
        operationId: op.operationId,
        state: op.state,
        reason: 'running_without_cancel',
      };
    }
    await this.options.ledger.setFenced(op, ['RUNNING', 'FAILED_RETRYABLE'], undefined, {
      cancel_requested: '1',
    });
    await this.options.queues.enqueueCancel({ operationId: op.operationId, tenantId: op.tenantId });
    return { type: 'requested', operationId: op.operationId };
  }

  private async lastOutcomeUnknown(op: Operation): Promise<boolean> {
    return op.uncertain || (await this.options.ledger.rawField(op, 'last_outcome_unknown')) === '1';
  }
}

/** Outer bound on one provider cancel call; the provider's own timeoutMs normally ends it first. */
const CANCEL_CALL_TIMEOUT_MS = 10_000;

export type CancelJobOutcome =
  | { readonly type: 'done'; readonly note: string }
  | { readonly type: 'again'; readonly delayMs: number };

/** Runs on workers: asks the provider to cancel a request in progress and records what it confirms. */
export class CancelProcessor {
  constructor(
    private readonly options: {
      ledger: OperationLedger;
      providers: ReadonlyMap<string, Provider>;
      log: Logger;
      pendingRecheckMs: number;
    },
  ) {}

  async process(tenantId: string, operationId: string): Promise<CancelJobOutcome> {
    const { ledger } = this.options;
    const op = await ledger.get(tenantId, operationId);
    if (!op || (op.state !== 'RUNNING' && op.state !== 'FAILED_RETRYABLE'))
      return { type: 'done', note: `state ${op?.state ?? 'missing'}` };
    const provider = this.options.providers.get(op.provider);
    if (!provider?.cancel) return { type: 'done', note: 'provider cannot cancel' };
    const log = this.options.log.child(operationLogFields(op));
    let answer: CancelResult;
    try {
      answer = await provider.cancel({
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey,
        tenantId: op.tenantId,
        operation: op.providerOperation,
        call: callContextOf(op),
        signal: AbortSignal.timeout(CANCEL_CALL_TIMEOUT_MS),
      });
    } catch (error) {
      // Not reached, or its effect unknown: nothing is claimed. The job fails this try and BullMQ
      // runs it again after a backoff; asking again is harmless (a cancel is idempotent).
      log.warn('the provider cancel call failed; it will be retried', { error });
      throw error;
    }
    log.info('provider answered the cancel request', { answer: answer.status });
    switch (answer.status) {
      case 'cancelled':
        try {
          // Fenced by the attempt the provider was asked about: a newer attempt is another request.
          await ledger.transition(op, {
            from: ['RUNNING', 'FAILED_RETRYABLE'],
            to: 'CANCELLED',
            attempt: op.attempt,
            actor: 'canceller',
            reason: 'provider_confirmed_cancel',
          });
          cancellationsConfirmed.labels(op.action, 'provider').inc();
          operationsFinished.labels(op.tenantId, op.action, 'CANCELLED').inc();
        } catch (error) {
          if (error instanceof StaleAttemptError) return { type: 'again', delayMs: 0 };
          if (!(error instanceof IllegalTransitionError)) throw error;
        }
        return { type: 'done', note: 'cancelled' };
      case 'pending':
        return { type: 'again', delayMs: this.options.pendingRecheckMs };
      case 'already_committed':
        // The worker's own attempt records the commit; nothing to claim here.
        return { type: 'done', note: 'already committed' };
      case 'not_supported':
        return { type: 'done', note: 'not supported' };
    }
  }
}
