/**
 * Runs one attempt of an operation against its provider. Called by the BullMQ worker for a job
 * whose id is the operation id; everything it decides goes through the ledger's compare-and-set.
 *
 * The rule that matters most: once a request to a provider that does not honour idempotency keys
 * may have left this process ("sending"), a lost answer makes the operation UNKNOWN and a reconcile
 * job asks the provider. It is never sent again blindly.
 */
import type { ActionConfig } from '../../config/schema.ts';
import type { Logger } from '../../config/log.ts';
import { incWithExemplar, observeWithExemplar } from '../../config/metrics.ts';
import {
  attempts,
  executionToCommit,
  leaseDelays,
  leasesLost,
  operationsFinished,
  providerTimeouts,
  retryBudgetExhausted,
  unknownOpened,
} from '../action-metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../ledger/ledger-errors.ts';
import { leaseHolder } from '../ledger/keys.ts';
import { isTerminal, type Operation, type OperationState } from '../ledger/operation.ts';
import type { OperationLedger, TransitionChange, TransitionOutcome } from '../ledger/operation-ledger.ts';
import { ProviderOutcomeUnknownError, ProviderUnreachableError, type Provider, type ProviderResult } from '../providers/provider.ts';
import { executionQueueFor, type OperationJobData, type OperationQueues } from '../queues/operation-queues.ts';
import { OperationLogger } from './operation-logger.ts';
import { decideRetry } from './retry-policy.ts';

/** What the worker does with the job after an attempt. */
export type ExecutionOutcome =
  | { readonly type: 'done'; readonly state?: OperationState; readonly note?: string }
  /** Put the job back for later without spending an attempt (no lease, or a scheduled retry). */
  | { readonly type: 'delay'; readonly delayMs: number; readonly reason: 'no_lease' | 'retry' };

export interface OperationExecutorOptions {
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  readonly providers: ReadonlyMap<string, Provider>;
  /** Action configuration of a tenant's action (undefined when it is no longer configured). */
  readonly actionConfig: (tenantId: string, action: string) => ActionConfig | undefined;
  readonly log: Logger;
  /** Lease time to live: longer than the job lock, renewed while the attempt runs. */
  readonly leaseTtlMs: number;
  /** How long a reconcile waits after the request was sent before trusting "not found". */
  readonly reconcileGraceMs: number;
  readonly now?: () => number;
  readonly random?: () => number;
}

/** Delay before a job that found no free lease looks again; jittered so waiting jobs do not align. */
const NO_LEASE_DELAY_MS = 100;

/** An attempt this process has begun (RUNNING, lease held): what it runs with. */
interface StartedAttempt {
  /** The operation as the start left it: RUNNING at `attempt`, marked sending. */
  readonly op: Operation;
  readonly action: ActionConfig;
  readonly provider: Provider;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** The attempt's number: 1 for the first. */
  readonly attempt: number;
  /** When this attempt began (for execution-to-commit on a first attempt). */
  readonly attemptStart: number;
}

/** The lease of a running attempt, which only that attempt renews and gives back. */
interface AttemptLease {
  /** Stops renewing and gives the lease back; once (later calls return the first give-back). */
  giveBack(): Promise<void>;
}

export class OperationExecutor {
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly options: OperationExecutorOptions) {
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  async execute(job: OperationJobData, signal: AbortSignal): Promise<ExecutionOutcome> {
    const { ledger } = this.options;
    const { tenantId, operationId } = job;
    let op: Operation | undefined;
    const jobAction = job.action === undefined ? undefined : this.options.actionConfig(tenantId, job.action);
    const jobProvider = jobAction === undefined ? undefined : this.options.providers.get(jobAction.provider);
    if (job.action !== undefined && jobAction !== undefined && jobProvider !== undefined) {
      // The job names its action: the attempt begins in the step that reads the operation, when it
      // is due. What is not due comes back as it is and takes the general path below.
      const attemptStart = this.now();
      const started = await ledger.start({ tenantId, operationId, action: job.action }, jobAction.provider, {
        now: attemptStart,
        ttlMs: this.options.leaseTtlMs,
        max: jobAction.maxConcurrent,
      });
      switch (started.type) {
        case 'not_found':
          return { type: 'done', note: 'operation not found' };
        case 'no_lease':
          return this.noLease(tenantId, job.action);
        case 'started': {
          const running = started.operation;
          const log = new OperationLogger(this.options.log, running);
          return this.run({ op: running, action: jobAction, provider: jobProvider, signal, log, attempt: running.attempt, attemptStart });
        }
        case 'as_is':
          op = started.operation;
          break;
      }
    }
    op ??= await ledger.get(tenantId, operationId);
    if (!op) return { type: 'done', note: 'operation not found' };
    return this.decide(op, signal, true);
  }

  /**
   * The general path: an operation that did not start in the step that read it. It is cancelled or
   * failed when late, taken over when its attempt was lost, or started here. `decideAgain`: a start
   * that finds the operation not due after all (a deadline passed meanwhile) decides once more.
   */
  private async decide(op: Operation, signal: AbortSignal, decideAgain: boolean): Promise<ExecutionOutcome> {
    const { ledger } = this.options;
    const { tenantId, operationId } = op;
    if (isTerminal(op.state) || op.state === 'UNKNOWN') return { type: 'done', state: op.state, note: 'nothing to run' };
    const log = new OperationLogger(this.options.log, op);
    const action = this.options.actionConfig(op.tenantId, op.action);
    const provider = this.options.providers.get(op.provider);
    const now = this.now();

    if (op.state === 'ADMITTED' && (now > op.admissionDeadlineAt || now > op.deadlineAt)) {
      const reason = now > op.deadlineAt ? 'deadline_passed_before_start' : 'admission_deadline_passed';
      return this.finish(op, { from: ['ADMITTED'], to: 'CANCELLED', reason, fields: { error: errorJson(reason, 'not started in time; the provider was never called') } }, log);
    }
    if (!action || !provider) {
      const reason = !action ? 'action_not_configured' : 'provider_not_configured';
      if (op.state === 'ADMITTED') return this.finish(op, { from: ['ADMITTED'], to: 'CANCELLED', reason }, log);
      if (op.state === 'FAILED_RETRYABLE') return this.finish(op, { from: ['FAILED_RETRYABLE'], to: 'FAILED_FINAL', reason }, log);
    }
    if (!action || !provider) return { type: 'done', note: 'not configured' };

    if (op.state === 'RUNNING') {
      // A redelivered job: the worker that ran it is gone (stalled lock) or this is a duplicate delivery.
      if (op.sending && !resendSafe(op)) {
        await this.toUnknown(op, 'RUNNING', op.attempt, 'redelivered_while_sending', log);
        return { type: 'done', state: 'UNKNOWN' };
      }
      try {
        // The lost attempt may have reached the provider: a resend is safe (same key), giving up is not.
        const fields = op.sending && op.kind === 'mutation' ? { uncertain: '1' } : undefined;
        await ledger.transition(op, { from: ['RUNNING'], to: 'FAILED_RETRYABLE', attempt: op.attempt, actor: 'worker', reason: 'worker_lost', fields });
      } catch (error) {
        if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) return { type: 'done', note: 'taken over elsewhere' };
        throw error;
      }
      op = await ledger.require(tenantId, operationId);
    }
    if (op.state === 'FAILED_RETRYABLE' && now > op.deadlineAt) {
      if (op.uncertain && op.kind === 'mutation') {
        await this.toUnknown(op, 'FAILED_RETRYABLE', op.attempt, 'deadline_after_unknown_outcome', log);
        return { type: 'done', state: 'UNKNOWN' };
      }
      return this.finish(op, { from: ['FAILED_RETRYABLE'], to: 'FAILED_FINAL', reason: 'deadline', fields: { error: errorJson('deadline', 'the operation deadline passed') } }, log);
    }

    // One attempt under the tenant's concurrency lease, taken in the same step as the move to RUNNING
    // (marked sending: from here the request may leave this process). The clock is read again: the
    // lease expires from it.
    const attemptStart = this.now();
    const started = await ledger.start({ tenantId, operationId, action: op.action }, op.provider, { now: attemptStart, ttlMs: this.options.leaseTtlMs, max: action.maxConcurrent });
    switch (started.type) {
      case 'not_found':
        return { type: 'done', note: 'operation not found' };
      case 'no_lease':
        return this.noLease(tenantId, op.action);
      case 'as_is': {
        const current = started.operation;
        if (decideAgain && (current.state === 'ADMITTED' || current.state === 'FAILED_RETRYABLE')) return this.decide(current, signal, false);
        // Cancelled before start, or another worker began an attempt meanwhile: the provider is not called.
        return { type: 'done', note: `not started: the operation is ${current.state} at attempt ${current.attempt}` };
      }
      case 'started':
        return this.run({ op: started.operation, action, provider, signal, log, attempt: started.operation.attempt, attemptStart });
    }
  }

  /** A job that found every lease taken waits, without spending an attempt. */
  private noLease(tenantId: string, action: string): ExecutionOutcome {
    leaseDelays.labels(tenantId, action).inc();
    return { type: 'delay', delayMs: Math.round(NO_LEASE_DELAY_MS * (1 + this.random())), reason: 'no_lease' };
  }

  /**
   * A started attempt. Its lease is its own (held as `<operation id>:<attempt>`): renewed while the
   * provider works and given back with the move that ends the attempt (issued in the same tick), or at
   * the end if no move was made. An outdated attempt (taken over after a stall) thus never gives
   * back, or renews, the lease of the attempt that replaced it. A crash leaves the lease to expire.
   *
   * A renewal that finds the lease gone (it expired while this process stalled) is counted and
   * logged, and renewal stops: the lease is never taken back, since the slot may be another
   * attempt's now. The one request of this attempt is already sent and is left to finish (dropping
   * it would not undo it); anything after it, a retry included, is a new attempt that needs a lease
   * of its own.
   */
  private async run(started: StartedAttempt): Promise<ExecutionOutcome> {
    const { op, log, attempt } = started;
    const { ledger } = this.options;
    const holder = leaseHolder(op.operationId, attempt);
    /** A renewal found the lease gone (expired, or removed): the slot may be another attempt's now. */
    let lost = false;
    let givenBack: Promise<void> | undefined;
    const renew = setInterval(() => {
      ledger.renewLease(op.tenantId, op.action, holder, this.options.leaseTtlMs).then(
        (held) => {
          if (held || lost || givenBack !== undefined) return;
          lost = true;
          clearInterval(renew);
          leasesLost.labels(op.tenantId, op.action).inc();
          log.warn('concurrency lease lost while the request was at the provider: the action may be above its limit until it answers', { attempt });
        },
        (error: unknown) => log.warn('lease renewal failed', { error }),
      );
    }, Math.max(50, Math.floor(this.options.leaseTtlMs / 3)));
    const lease: AttemptLease = {
      giveBack: () => {
        clearInterval(renew);
        givenBack ??= ledger.releaseLease(op.tenantId, op.action, holder);
        return givenBack;
      },
    };
    try {
      return await this.send(started, lease);
    } finally {
      await lease.giveBack();
    }
  }

  private async send(started: StartedAttempt, lease: AttemptLease): Promise<ExecutionOutcome> {
    const { op, action, provider, signal, log, attempt, attemptStart } = started;
    attempts.labels(op.action, attempt === 1 ? 'first' : 'retry').inc();
    let result: ProviderResult;
    try {
      result = await executeUntilDeadline(provider, op, signal, Math.max(1, op.deadlineAt - this.now()));
    } catch (error) {
      const definitelyNotSent = error instanceof ProviderUnreachableError;
      if (!definitelyNotSent && error instanceof ProviderOutcomeUnknownError) providerTimeouts.labels(op.action).inc();
      if (!definitelyNotSent && !resendSafe(op)) {
        // Timeout after sending, dropped connection, garbage: the effect may exist. Ask, do not resend.
        await this.toUnknown({ ...op, attempt }, 'RUNNING', attempt, error instanceof Error ? error.message : String(error), log, lease);
        return { type: 'done', state: 'UNKNOWN' };
      }
      const code = definitelyNotSent ? 'unreachable' : 'outcome_unknown';
      return this.retryOrFail({ ...op, attempt }, action, code, error instanceof Error ? error.message : String(error), !definitelyNotSent && op.kind === 'mutation', log, lease);
    }

    if (result.status === 'ok') {
      const fields: Record<string, string> = { result: JSON.stringify(result.result), committed_at: String(this.now()), error: '' };
      if (result.providerRef !== undefined) fields.provider_ref = result.providerRef;
      const outcome = await this.finish({ ...op, attempt }, { from: ['RUNNING'], to: 'COMMITTED', attempt, reason: 'provider_committed', fields }, log, lease);
      if (outcome.type === 'done' && outcome.state === 'COMMITTED') {
        observeWithExemplar(executionToCommit, { action: op.action }, (this.now() - (op.startedAt ?? attemptStart)) / 1000, { operation_id: op.operationId, session_id: op.scope.sessionId });
      }
      return outcome;
    }
    if (!result.retryable) {
      // Read now, not from the start of the attempt: a cancel is asked for while the request runs.
      const cancelled = result.code === 'cancelled' && (op.cancelRequested || (await this.options.ledger.rawField(op, 'cancel_requested')) === '1');
      return this.finish(
        { ...op, attempt },
        { from: ['RUNNING'], to: cancelled ? 'CANCELLED' : 'FAILED_FINAL', attempt, reason: cancelled ? 'cancelled_by_provider' : result.code, fields: { error: errorJson(result.code, result.message) } },
        log,
        lease,
      );
    }
    return this.retryOrFail({ ...op, attempt }, action, result.code, result.message, false, log, lease);
  }

  /** A retryable failure: FAILED_RETRYABLE and a delayed retry, or FAILED_FINAL when out of attempts, deadline or budget. */
  private async retryOrFail(
    op: Operation,
    action: ActionConfig,
    code: string,
    message: string,
    outcomeUnknown: boolean,
    log: Logger,
    lease: AttemptLease,
  ): Promise<ExecutionOutcome> {
    const decision = decideRetry(action.retry, op.attempt, this.now(), op.deadlineAt, this.random);
    let reason: string | undefined = decision.retry ? undefined : decision.reason;
    if (decision.retry) {
      const budget = await this.options.ledger.spendRetry(op, {
        windowMs: action.retry.budgetWindowSeconds * 1000,
        ratio: action.retry.budgetRatio,
        minimum: action.retry.budgetMinRetries,
      });
      if (!budget.allowed) {
        retryBudgetExhausted.labels(op.action).inc();
        reason = 'retry_budget_exhausted';
      }
    }
    const error = errorJson(code, message);
    if (reason !== undefined) {
      if (outcomeUnknown || (op.uncertain && op.kind === 'mutation')) {
        // This or an earlier attempt may have committed: giving up must not claim it failed. Ask first.
        await this.toUnknown(op, 'RUNNING', op.attempt, `${reason} after ${code}`, log, lease);
        return { type: 'done', state: 'UNKNOWN' };
      }
      return this.finish(op, { from: ['RUNNING'], to: 'FAILED_FINAL', attempt: op.attempt, reason, fields: { error } }, log, lease);
    }
    try {
      await this.move(
        op,
        {
          from: ['RUNNING'],
          to: 'FAILED_RETRYABLE',
          attempt: op.attempt,
          actor: 'worker',
          reason: code,
          fields: outcomeUnknown ? { error, last_outcome_unknown: '1', uncertain: '1' } : { error, last_outcome_unknown: '0' },
        },
        lease,
      );
    } catch (e) {
      if (e instanceof IllegalTransitionError || e instanceof StaleAttemptError) return { type: 'done', note: e.message };
      throw e;
    }
    const delayMs = decision.retry ? decision.delayMs : 0;
    log.info('operation will be retried', { attempt: op.attempt, delay_ms: delayMs, code });
    return { type: 'delay', delayMs, reason: 'retry' };
  }

  private async toUnknown(op: Operation, from: 'RUNNING' | 'FAILED_RETRYABLE', attempt: number, reason: string, log: Logger, lease?: AttemptLease): Promise<void> {
    try {
      await this.move(op, { from: [from], to: 'UNKNOWN', attempt, actor: 'worker', reason, fields: { error: errorJson('outcome_unknown', reason) } }, lease);
    } catch (error) {
      if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) return;
      throw error;
    }
    incWithExemplar(unknownOpened, { action: op.action }, { operation_id: op.operationId, session_id: op.scope.sessionId });
    log.warn('operation outcome unknown; reconciling', { reason });
    await this.options.queues.enqueueReconcile({ operationId: op.operationId, tenantId: op.tenantId, tries: 0, reason }, this.options.reconcileGraceMs);
  }

  private async finish(
    op: Operation,
    change: { from: OperationState[]; to: OperationState; attempt?: number; reason: string; fields?: Record<string, string> },
    log: Logger,
    lease?: AttemptLease,
  ): Promise<ExecutionOutcome> {
    try {
      // Spelled out: a spread that adds properties takes V8's slow path, and this runs per operation.
      const { from, to, attempt, reason, fields } = change;
      await this.move(op, { from, to, attempt, reason, fields, actor: 'worker' }, lease);
    } catch (error) {
      if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) {
        log.info('transition refused', { to: change.to, reason: error.message });
        return { type: 'done', note: error.message };
      }
      throw error;
    }
    if (isTerminal(change.to)) operationsFinished.labels(op.tenantId, op.action, change.to).inc();
    log.info('operation finished', { state: change.to, reason: change.reason });
    return { type: 'done', state: change.to };
  }

  /**
   * A move of the operation; with `lease`, a move that ends that attempt, and its lease goes back
   * in the same write (both are issued in one tick), whether or not the move is refused.
   */
  private async move(op: Operation, change: TransitionChange, lease: AttemptLease | undefined): Promise<TransitionOutcome> {
    const moved = this.options.ledger.transition(op, change);
    const givenBack = lease?.giveBack();
    try {
      return await moved;
    } finally {
      await givenBack;
    }
  }
}

/**
 * Calls the provider with the job's signal bounded by the operation's deadline: one controller and
 * one timer per attempt (cheaper than AbortSignal.any over AbortSignal.timeout), undone at the end.
 */
async function executeUntilDeadline(provider: Provider, op: Operation, signal: AbortSignal, ms: number): Promise<ProviderResult> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  const timer = setTimeout(() => controller.abort(new DOMException('the operation deadline passed', 'TimeoutError')), ms);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await provider.execute({
      operationId: op.operationId,
      idempotencyKey: op.idempotencyKey,
      tenantId: op.tenantId,
      operation: op.providerOperation,
      params: op.params,
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

/** Sending again cannot create a second effect: the provider dedupes by key, or the action only reads. */
function resendSafe(op: Pick<Operation, 'providerIdempotent' | 'kind'>): boolean {
  return op.providerIdempotent || op.kind === 'read';
}

export function errorJson(code: string, message: string): string {
  return JSON.stringify({ code, message });
}

/** The execution queue of an operation. */
export function executionQueueOf(op: Pick<Operation, 'kind' | 'providerIdempotent'>) {
  return executionQueueFor(op.kind, op.providerIdempotent);
}
