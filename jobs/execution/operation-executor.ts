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
  sendsRefused,
  unknownOpened,
  voids,
} from '../action-metrics.ts';
import { IllegalTransitionError, StaleAttemptError } from '../ledger/ledger-errors.ts';
import { leaseHolder } from '../ledger/keys.ts';
import { isTerminal, type Operation, type OperationState } from '../ledger/operation.ts';
import type {
  OperationLedger,
  SendingDurability,
  TransitionChange,
  TransitionOutcome,
} from '../ledger/operation-ledger.ts';
import {
  callContextOf,
  ProviderOutcomeUnknownError,
  ProviderUnreachableError,
  type Provider,
  type ProviderResult,
} from '../providers/provider.ts';
import {
  executionQueueFor,
  type OperationJobData,
  type OperationQueues,
} from '../queues/operation-queues.ts';
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
  /** How the sending mark of a mutation is made durable before its request leaves (config redis.durability). */
  readonly durability?: SendingDurability;
  readonly random?: () => number;
}

/**
 * How soon an operation that went UNKNOWN is first looked up. Well below the reconcile grace: a
 * lookup that finds the request committed or still processing is believed at once, so the caller
 * hears sooner and the attempt's lease is settled (or kept) before its parked bound passes.
 */
const FIRST_LOOKUP_DELAY_MS = 500;

/** Delay before a job that found no free lease looks again; jittered so waiting jobs do not align. */
const NO_LEASE_DELAY_MS = 100;

const NO_DURABILITY: SendingDurability = { mode: 'none', replicas: 1, timeoutMs: 1_000 };

/**
 * How long an attempt refused before its request left (its sending mark not durable, its lease
 * expired while paused) waits before it is tried again. Such an attempt spends nothing of the retry
 * policy (nothing was sent), so it waits a fixed, short time; the operation deadline still bounds it.
 */
const NOT_SENT_RETRY_MS = 250;

/**
 * How long a retry waits when an earlier attempt could not be voided before it (still in progress
 * at the provider, or the void went unanswered): about a provider round trip, asked again until
 * the operation deadline.
 */
const EARLIER_ATTEMPT_RETRY_MS = 1_000;

/** An attempt this process has begun (RUNNING, lease held): what it runs with. */
interface StartedAttempt {
  /** The operation as the start left it: RUNNING at `attempt`, marked sending, with its fence token. */
  readonly op: Operation;
  readonly action: ActionConfig;
  readonly provider: Provider;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** The attempt's number: 1 for the first. */
  readonly attempt: number;
  /** When this attempt began (for execution-to-commit on a first attempt). */
  readonly attemptStart: number;
  /** The same on this process's monotonic clock (performance.now), which a paused process sees pass. */
  readonly startedMono: number;
}

/**
 * What the move that ends an attempt does with its lease: `release` when the attempt's outcome is
 * settled (an answer, or certainly not sent), `park` when it is not (the request may still be at
 * the provider: the lease is kept until the send time plus the provider timeout and the reconcile
 * grace, or until reconciliation settles it).
 */
type LeaseEnd = 'release' | 'park';

/** The lease of a running attempt, which only that attempt renews and ends. */
interface AttemptLease {
  /** The lease as the move that ends the attempt carries it. */
  change(end: LeaseEnd): NonNullable<TransitionChange['lease']>;
  /** Stops renewing (the move that ended the attempt carried the lease, or it is left to expire). */
  stop(): void;
  /** Ends the lease by itself, for a move that was refused (the script did not touch it). */
  endAlone(end: LeaseEnd): Promise<void>;
  /** False when a renewal found the lease gone (it expired while this process was paused). */
  held(): Promise<boolean>;
}

/** How a retryable end of an attempt (or of a lost one) is settled. */
interface RetryRequest {
  readonly from: 'RUNNING' | 'FAILED_RETRYABLE';
  readonly actor: 'worker';
  readonly code: string;
  readonly message: string;
  /** The attempt may have taken effect (its outcome is unknown). */
  readonly outcomeUnknown: boolean;
  readonly lease?: { readonly handle: AttemptLease; readonly end: LeaseEnd };
  readonly fields?: Readonly<Record<string, string>>;
}

export class OperationExecutor {
  private readonly random: () => number;
  private readonly durability: SendingDurability;

  constructor(private readonly options: OperationExecutorOptions) {
    this.random = options.random ?? Math.random;
    this.durability = options.durability ?? NO_DURABILITY;
  }

  async execute(job: OperationJobData, signal: AbortSignal): Promise<ExecutionOutcome> {
    const { ledger } = this.options;
    const { tenantId, operationId } = job;
    let op: Operation | undefined;
    const jobAction =
      job.action === undefined ? undefined : this.options.actionConfig(tenantId, job.action);
    const jobProvider =
      jobAction === undefined ? undefined : this.options.providers.get(jobAction.provider);
    if (job.action !== undefined && jobAction !== undefined && jobProvider !== undefined) {
      // The job names its action: the attempt begins in the step that reads the operation, when it
      // is due. What is not due comes back as it is and takes the general path below.
      const attemptStart = Date.now();
      const startedMono = performance.now();
      const started = await ledger.start(
        { tenantId, operationId, action: job.action },
        jobAction.provider,
        this.attemptLimits(jobAction, jobProvider),
      );
      switch (started.type) {
        case 'not_found':
          return { type: 'done', note: 'operation not found' };
        case 'no_lease':
          return this.noLease(tenantId, job.action);
        case 'started': {
          const running = started.operation;
          const log = new OperationLogger(this.options.log, running);
          return this.run({
            op: running,
            action: jobAction,
            provider: jobProvider,
            signal,
            log,
            attempt: running.attempt,
            attemptStart,
            startedMono,
          });
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

  private attemptLimits(
    action: ActionConfig,
    provider: Provider | undefined,
  ): { ttlMs: number; max: number; maxAttempts: number } {
    return {
      ttlMs: this.leaseMs(provider),
      max: action.maxConcurrent,
      maxAttempts: action.retry.maxAttempts,
    };
  }

  /**
   * How long an attempt's lease lasts from its start and from each renewal. A request leaves at
   * most half the lease time to live after the last confirmed renewal (after that the lease is
   * checked, and renewed, first), so a lease this long outlasts the request at the provider
   * (its timeout plus the grace) however its worker fares meanwhile: paused, cut off from Redis
   * (test/integration/exactly-once/lease-held-until-settled.test.ts).
   */
  private leaseMs(provider: Provider | undefined): number {
    const { leaseTtlMs } = this.options;
    return provider === undefined
      ? leaseTtlMs
      : Math.max(leaseTtlMs, leaseTtlMs / 2 + this.parkMs(provider));
  }

  /** How long an attempt whose outcome is unknown keeps its lease after its request was sent. */
  private parkMs(provider: Provider): number {
    return provider.timeoutMs + this.options.reconcileGraceMs;
  }

  /**
   * The general path: an operation that did not start in the step that read it. It is cancelled or
   * failed when late or out of attempts, taken over when its attempt was lost, or started here.
   * `decideAgain`: a start that finds the operation not due after all (a deadline passed
   * meanwhile) decides once more. Deadlines are compared on the Redis clock, as the start does.
   */
  private async decide(
    op: Operation,
    signal: AbortSignal,
    decideAgain: boolean,
  ): Promise<ExecutionOutcome> {
    const { ledger } = this.options;
    const { tenantId, operationId } = op;
    if (isTerminal(op.state) || op.state === 'UNKNOWN')
      return { type: 'done', state: op.state, note: 'nothing to run' };
    const log = new OperationLogger(this.options.log, op);
    const action = this.options.actionConfig(op.tenantId, op.action);
    const provider = this.options.providers.get(op.provider);
    const now = await ledger.time();

    if (op.state === 'ADMITTED' && (now > op.admissionDeadlineAt || now > op.deadlineAt)) {
      const reason =
        now > op.deadlineAt ? 'deadline_passed_before_start' : 'admission_deadline_passed';
      return this.finish(
        op,
        {
          from: ['ADMITTED'],
          to: 'CANCELLED',
          reason,
          fields: {
            error: errorJson(reason, 'not started in time; the provider was never called'),
          },
        },
        log,
      );
    }
    if (!action || !provider) {
      const reason = !action ? 'action_not_configured' : 'provider_not_configured';
      if (op.state === 'ADMITTED')
        return this.finish(op, { from: ['ADMITTED'], to: 'CANCELLED', reason }, log);
      if (op.state === 'FAILED_RETRYABLE')
        return this.finish(op, { from: ['FAILED_RETRYABLE'], to: 'FAILED_FINAL', reason }, log);
    }
    if (!action || !provider) return { type: 'done', note: 'not configured' };

    if (op.state === 'RUNNING') return this.takeOver(op, action, provider, log);
    if (
      op.state === 'FAILED_RETRYABLE' &&
      (now > op.deadlineAt || op.sentAttempts >= action.retry.maxAttempts)
    ) {
      const reason = now > op.deadlineAt ? 'deadline' : 'attempts_exhausted';
      if (op.uncertain && op.kind === 'mutation') {
        await this.toUnknown(op, 'FAILED_RETRYABLE', `${reason}_after_unknown_outcome`, log);
        return { type: 'done', state: 'UNKNOWN' };
      }
      const message =
        reason === 'deadline' ? 'the operation deadline passed' : 'no attempt is left';
      return this.finish(
        op,
        {
          from: ['FAILED_RETRYABLE'],
          to: 'FAILED_FINAL',
          attempt: op.attempt,
          reason,
          fields: { error: errorJson(reason, message) },
        },
        log,
      );
    }

    // One attempt under the tenant's concurrency lease, taken in the same step as the move to RUNNING
    // (marked sending: from here the request may leave this process).
    const attemptStart = Date.now();
    const startedMono = performance.now();
    const started = await ledger.start(
      { tenantId, operationId, action: op.action },
      op.provider,
      this.attemptLimits(action, this.options.providers.get(op.provider)),
    );
    switch (started.type) {
      case 'not_found':
        return { type: 'done', note: 'operation not found' };
      case 'no_lease':
        return this.noLease(tenantId, op.action);
      case 'as_is': {
        const current = started.operation;
        if (decideAgain && (current.state === 'ADMITTED' || current.state === 'FAILED_RETRYABLE'))
          return this.decide(current, signal, false);
        // Cancelled before start, or another worker began an attempt meanwhile: the provider is not called.
        return {
          type: 'done',
          note: `not started: the operation is ${current.state} at attempt ${current.attempt}`,
        };
      }
      case 'started':
        return this.run({
          op: started.operation,
          action,
          provider,
          signal,
          log,
          attempt: started.operation.attempt,
          attemptStart,
          startedMono,
        });
    }
  }

  /**
   * A redelivered job whose operation is RUNNING: the worker that ran it is gone (a stalled lock)
   * or paused. Its attempt is fenced off: a send that may have left goes to reconciliation when a
   * resend could be a second effect; otherwise the operation is retried like any failed attempt,
   * counted against the attempts, the backoff and the retry budget. The lost attempt's lease is
   * kept while its request may still be at the provider.
   */
  private async takeOver(
    op: Operation,
    action: ActionConfig,
    provider: Provider,
    log: Logger,
  ): Promise<ExecutionOutcome> {
    const lost: AttemptLease = {
      change: (end) =>
        end === 'park' ? { mode: 'park', forMs: this.parkMs(provider) } : { mode: 'release' },
      stop: () => undefined,
      endAlone: async () => undefined,
      held: async () => false,
    };
    if (op.sending && !resendSafe(op)) {
      await this.toUnknown(op, 'RUNNING', 'redelivered_while_sending', log, {
        handle: lost,
        end: 'park',
      });
      return { type: 'done', state: 'UNKNOWN' };
    }
    return this.retryOrGiveUp(
      op,
      action,
      {
        from: 'RUNNING',
        actor: 'worker',
        code: 'worker_lost',
        message: 'the worker running the attempt was lost',
        // The lost attempt may have reached the provider: a resend is safe (same key), giving up is not.
        outcomeUnknown: op.sending && op.kind === 'mutation',
        lease: { handle: lost, end: op.sending ? 'park' : 'release' },
      },
      log,
    );
  }

  /** A job that found every lease taken waits, without spending an attempt. */
  private noLease(tenantId: string, action: string): ExecutionOutcome {
    leaseDelays.labels(tenantId, action).inc();
    return {
      type: 'delay',
      delayMs: Math.round(NO_LEASE_DELAY_MS * (1 + this.random())),
      reason: 'no_lease',
    };
  }

  /**
   * A started attempt. Its lease is its own (held as `<operation id>:<attempt>`): renewed while the
   * provider works, and ended by the move that ends the attempt, in the same script: given back
   * when the outcome is settled, kept ("parked") for the send time plus the provider timeout and
   * the reconcile grace when it is not (a timed-out request may still be at the provider; the
   * provider must not see more than maxConcurrent requests of the tenant and action). An outdated
   * attempt (taken over after a stall) thus never gives back, or renews, the lease of the attempt
   * that replaced it. A crash, or an error with no move, leaves the lease to expire.
   *
   * A renewal that finds the lease gone (it expired while this process stalled) is counted and
   * logged, and renewal stops: the lease is never taken back, since the slot may be another
   * attempt's now. A lease found gone before the request is sent stops the send.
   */
  private async run(started: StartedAttempt): Promise<ExecutionOutcome> {
    const { op, log, attempt, provider } = started;
    const { ledger } = this.options;
    const holder = leaseHolder(op.operationId, attempt);
    /** A renewal found the lease gone (expired, or removed): the slot may be another attempt's now. */
    let lost = false;
    let stopped = false;
    const noteLost = () => {
      if (lost || stopped) return;
      lost = true;
      clearInterval(renew);
      leasesLost.labels(op.tenantId, op.action).inc();
      log.warn(
        'concurrency lease lost while the attempt ran: the action may be above its limit until it answers',
        { attempt },
      );
    };
    const renewOnce = async (): Promise<boolean> => {
      const held = await ledger.renewLease(op.tenantId, op.action, holder, this.leaseMs(provider));
      if (!held) noteLost();
      return held;
    };
    const renew = setInterval(
      () => {
        renewOnce().catch((error: unknown) => log.warn('lease renewal failed', { error }));
      },
      Math.max(50, Math.floor(this.options.leaseTtlMs / 3)),
    );
    const lease: AttemptLease = {
      change: (end) =>
        end === 'park' ? { mode: 'park', forMs: this.parkMs(provider) } : { mode: 'release' },
      stop: () => {
        stopped = true;
        clearInterval(renew);
      },
      endAlone: (end) =>
        end === 'park'
          ? ledger.parkLease(
              op.tenantId,
              op.action,
              holder,
              (op.sendingAt ?? 0) + this.parkMs(provider),
            )
          : ledger.releaseLease(op.tenantId, op.action, holder),
      held: () => (lost ? Promise.resolve(false) : renewOnce()),
    };
    try {
      return await this.send(started, lease);
    } finally {
      lease.stop();
    }
  }

  private async send(started: StartedAttempt, lease: AttemptLease): Promise<ExecutionOutcome> {
    const { op, action, provider, signal, log, attempt, attemptStart, startedMono } = started;
    const { ledger } = this.options;
    attempts.labels(op.action, attempt === 1 ? 'first' : 'retry').inc();
    if (attempt > 1 && op.uncertain && provider.supportsVoid && provider.voidAttempts) {
      // An earlier attempt's request may still be on its way (held by a proxy, sent by a paused
      // worker): voided first, it can neither take effect late nor load the provider beside this one.
      const voided = await provider.voidAttempts({
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey,
        tenantId: op.tenantId,
        operation: op.providerOperation,
        call: callContextOf(op),
        attemptTokens: op.attemptTokens.filter((t) => t !== op.attemptToken),
        signal,
      });
      voids.labels(op.action, voided.status).inc();
      if (voided.status === 'committed') {
        const fields: Record<string, string> = {
          result: JSON.stringify(voided.result),
          committed_at: String(Date.now()),
          error: '',
        };
        if (voided.providerRef !== undefined) fields.provider_ref = voided.providerRef;
        return this.finish(
          op,
          {
            from: ['RUNNING'],
            to: 'COMMITTED',
            attempt,
            reason: 'earlier_attempt_committed',
            fields,
          },
          log,
          lease,
        );
      }
      if (voided.status !== 'voided')
        return this.notSent(
          op,
          'earlier_attempt_not_voided',
          voided.status === 'unknown'
            ? voided.reason
            : 'an earlier attempt is in progress at the provider',
          log,
          lease,
          EARLIER_ATTEMPT_RETRY_MS,
        );
    }
    if (op.kind === 'mutation') {
      // The mark that the request may have left must survive the loss of a Redis node before it
      // leaves (config redis.durability): a mark rolled back to ADMITTED would be sent a second time
      // without a key, or cancelled past its deadline as never sent with a key
      // (test/integration/exactly-once/sending-mark-durable.test.ts).
      const durable = await ledger.makeDurable(this.durability);
      if (!durable.ok) {
        sendsRefused.labels(op.action, 'not_durable').inc();
        log.warn('request not sent: its sending mark is not durable', {
          attempt,
          reason: durable.reason,
        });
        return this.notSent(op, 'sending_mark_not_durable', durable.reason, log, lease);
      }
    }
    // The lease cannot have expired yet unless this process was held up (paused) since the start:
    // only then is it asked for, so the common path spends no round trip on it.
    if (performance.now() - startedMono >= this.options.leaseTtlMs / 2 && !(await lease.held())) {
      // The lease expired before the request left (this process was paused): another attempt may
      // hold the slot, or have taken the operation over. Nothing is sent under a lost lease.
      sendsRefused.labels(op.action, 'lease_lost').inc();
      return this.notSent(
        op,
        'lease_lost_before_send',
        'the concurrency lease expired before the request was sent',
        log,
      );
    }
    let result: ProviderResult;
    try {
      // The deadline is on the Redis clock; the start read it (sendingAt), this process's monotonic
      // clock says how long ago.
      const now =
        op.sendingAt === undefined
          ? await ledger.time()
          : op.sendingAt + (performance.now() - startedMono);
      result = await executeUntilDeadline(provider, op, signal, Math.max(1, op.deadlineAt - now));
    } catch (error) {
      const definitelyNotSent = error instanceof ProviderUnreachableError;
      const message = error instanceof Error ? error.message : String(error);
      if (!definitelyNotSent && error instanceof ProviderOutcomeUnknownError)
        providerTimeouts.labels(op.action).inc();
      if (!definitelyNotSent && !resendSafe(op)) {
        // Timeout after sending, dropped connection, garbage: the effect may exist. Ask, do not resend.
        await this.toUnknown(op, 'RUNNING', message, log, { handle: lease, end: 'park' });
        return { type: 'done', state: 'UNKNOWN' };
      }
      const code = definitelyNotSent ? 'unreachable' : 'outcome_unknown';
      return this.retryOrGiveUp(
        op,
        action,
        {
          from: 'RUNNING',
          actor: 'worker',
          code,
          message,
          outcomeUnknown: !definitelyNotSent && op.kind === 'mutation',
          lease: { handle: lease, end: definitelyNotSent ? 'release' : 'park' },
        },
        log,
      );
    }

    if (result.status === 'ok') {
      const fields: Record<string, string> = {
        result: JSON.stringify(result.result),
        committed_at: String(Date.now()),
        error: '',
      };
      if (result.providerRef !== undefined) fields.provider_ref = result.providerRef;
      const outcome = await this.finish(
        op,
        { from: ['RUNNING'], to: 'COMMITTED', attempt, reason: 'provider_committed', fields },
        log,
        lease,
      );
      if (outcome.type === 'done' && outcome.state === 'COMMITTED') {
        observeWithExemplar(
          executionToCommit,
          { action: op.action },
          (Date.now() - (op.startedAt ?? attemptStart)) / 1000,
          { operation_id: op.operationId, session_id: op.scope.sessionId },
        );
      }
      return outcome;
    }
    if (!result.retryable) {
      // Read now, not from the start of the attempt: a cancel is asked for while the request runs.
      const cancelled =
        result.code === 'cancelled' &&
        (op.cancelRequested || (await ledger.rawField(op, 'cancel_requested')) === '1');
      return this.finish(
        op,
        {
          from: ['RUNNING'],
          to: cancelled ? 'CANCELLED' : 'FAILED_FINAL',
          attempt,
          reason: cancelled ? 'cancelled_by_provider' : result.code,
          fields: { error: errorJson(result.code, result.message) },
        },
        log,
        lease,
      );
    }
    return this.retryOrGiveUp(
      op,
      action,
      {
        from: 'RUNNING',
        actor: 'worker',
        code: result.code,
        message: result.message,
        outcomeUnknown: false,
        lease: { handle: lease, end: 'release' },
      },
      log,
    );
  }

  /**
   * An attempt refused before its request left: FAILED_RETRYABLE, not sending, its count given back
   * to the retry policy (nothing reached the provider), tried again after NOT_SENT_RETRY_MS.
   */
  private async notSent(
    op: Operation,
    code: string,
    message: string,
    log: Logger,
    lease?: AttemptLease,
    delayMs = NOT_SENT_RETRY_MS,
  ): Promise<ExecutionOutcome> {
    // Its token is dropped from the list a provider is asked to void: its request never existed.
    const tokens = op.attemptTokens.filter((t) => t !== op.attemptToken).join(',');
    const fields = {
      sending: '0',
      sent_attempts: String(Math.max(0, op.sentAttempts - 1)),
      attempt_tokens: tokens,
      error: errorJson(code, message),
      last_outcome_unknown: '0',
    };
    try {
      await this.move(
        op,
        {
          from: ['RUNNING'],
          to: 'FAILED_RETRYABLE',
          attempt: op.attempt,
          actor: 'worker',
          reason: code,
          fields,
        },
        lease,
        'release',
      );
    } catch (e) {
      if (e instanceof IllegalTransitionError || e instanceof StaleAttemptError)
        return { type: 'done', note: e.message };
      throw e;
    }
    return { type: 'delay', delayMs, reason: 'retry' };
  }

  /**
   * A retryable end of an attempt: FAILED_RETRYABLE and a delayed retry, or the end when the
   * attempts, the deadline or the retry budget say no more: FAILED_FINAL, or UNKNOWN when this or
   * an earlier attempt may have taken effect. Used for failed attempts and lost ones alike, so that
   * every send after the first is an attempt the retry policy counted.
   */
  private async retryOrGiveUp(
    op: Operation,
    action: ActionConfig,
    request: RetryRequest,
    log: Logger,
  ): Promise<ExecutionOutcome> {
    const { code, message, outcomeUnknown } = request;
    const decision = decideRetry(
      action.retry,
      op.sentAttempts,
      await this.options.ledger.time(),
      op.deadlineAt,
      this.random,
    );
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
        await this.toUnknown(op, request.from, `${reason} after ${code}`, log, request.lease);
        return { type: 'done', state: 'UNKNOWN' };
      }
      return this.finish(
        op,
        {
          from: [request.from],
          to: 'FAILED_FINAL',
          attempt: op.attempt,
          reason,
          fields: { ...request.fields, error },
        },
        log,
        request.lease?.handle,
        request.lease?.end,
      );
    }
    const fields: Record<string, string> = outcomeUnknown
      ? { ...request.fields, error, last_outcome_unknown: '1', uncertain: '1' }
      : { ...request.fields, error, last_outcome_unknown: '0' };
    try {
      await this.move(
        op,
        {
          from: [request.from],
          to: 'FAILED_RETRYABLE',
          attempt: op.attempt,
          actor: request.actor,
          reason: code,
          fields,
        },
        request.lease?.handle,
        request.lease?.end,
      );
    } catch (e) {
      if (e instanceof IllegalTransitionError || e instanceof StaleAttemptError)
        return { type: 'done', note: e.message };
      throw e;
    }
    const delayMs = decision.retry ? decision.delayMs : 0;
    log.info('operation will be retried', { attempt: op.attempt, delay_ms: delayMs, code });
    return { type: 'delay', delayMs, reason: 'retry' };
  }

  private async toUnknown(
    op: Operation,
    from: 'RUNNING' | 'FAILED_RETRYABLE',
    reason: string,
    log: Logger,
    lease?: { readonly handle: AttemptLease; readonly end: LeaseEnd },
  ): Promise<void> {
    try {
      await this.move(
        op,
        {
          from: [from],
          to: 'UNKNOWN',
          attempt: op.attempt,
          actor: 'worker',
          reason,
          fields: { error: errorJson('outcome_unknown', reason) },
        },
        lease?.handle,
        lease?.end,
      );
    } catch (error) {
      if (error instanceof IllegalTransitionError || error instanceof StaleAttemptError) return;
      throw error;
    }
    incWithExemplar(
      unknownOpened,
      { action: op.action },
      { operation_id: op.operationId, session_id: op.scope.sessionId },
    );
    log.warn('operation outcome unknown; reconciling', { reason });
    // Asked soon: "committed" or "still processing" are believed at once (and settle the lease sooner);
    // only "not found" waits for the grace, which the reconciler enforces.
    await this.options.queues.enqueueReconcile(
      { operationId: op.operationId, tenantId: op.tenantId, tries: 0, reason },
      Math.min(this.options.reconcileGraceMs, FIRST_LOOKUP_DELAY_MS),
    );
  }

  private async finish(
    op: Operation,
    change: {
      from: OperationState[];
      to: OperationState;
      attempt?: number;
      reason: string;
      fields?: Record<string, string>;
    },
    log: Logger,
    lease?: AttemptLease,
    end: LeaseEnd = 'release',
  ): Promise<ExecutionOutcome> {
    try {
      // Spelled out: a spread that adds properties takes V8's slow path, and this runs per operation.
      const { from, to, attempt, reason, fields } = change;
      await this.move(op, { from, to, attempt, reason, fields, actor: 'worker' }, lease, end);
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
   * A move of the operation, fenced by the attempt's token when it has one; with `lease`, a move
   * that ends that attempt and carries its lease (given back or parked in the same script). A
   * refused move did not touch the lease: it is ended by itself then.
   */
  private async move(
    op: Operation,
    change: TransitionChange,
    lease: AttemptLease | undefined,
    end: LeaseEnd = 'release',
  ): Promise<TransitionOutcome> {
    lease?.stop();
    const token = change.attempt === undefined ? undefined : op.attemptToken;
    const fenced: TransitionChange =
      lease === undefined || change.attempt === undefined
        ? { ...change, token }
        : { ...change, token, lease: lease.change(end) };
    try {
      return await this.options.ledger.transition(op, fenced);
    } catch (error) {
      if (
        lease !== undefined &&
        (error instanceof IllegalTransitionError || error instanceof StaleAttemptError)
      )
        await lease.endAlone(end);
      throw error;
    }
  }
}

/**
 * Calls the provider with the job's signal bounded by the operation's deadline: one controller and
 * one timer per attempt (cheaper than AbortSignal.any over AbortSignal.timeout), undone at the end.
 */
async function executeUntilDeadline(
  provider: Provider,
  op: Operation,
  signal: AbortSignal,
  ms: number,
): Promise<ProviderResult> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  const timer = setTimeout(
    () => controller.abort(new DOMException('the operation deadline passed', 'TimeoutError')),
    ms,
  );
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await provider.execute({
      operationId: op.operationId,
      idempotencyKey: op.idempotencyKey,
      attemptToken: op.attemptToken,
      tenantId: op.tenantId,
      operation: op.providerOperation,
      params: op.params,
      call: callContextOf(op),
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
