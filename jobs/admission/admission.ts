/**
 * Admission: turns a validated request into an operation, or into a typed refusal, fast. The
 * ledger record is written first (with the capacity check and duplicate detection in the same Lua
 * step), then the job is enqueued; an outbox sweep covers a crash between the two.
 *
 * The decision is given once the ledger has answered: from then on the operation is durable and
 * its job certain (the outbox holds it until the enqueue lands, and the sweep enqueues what a crash
 * or a failed enqueue left behind), so the caller does not wait for the second round trip, and a
 * failed enqueue never turns an admitted operation into an error the model would repeat.
 */
import type { ZodType } from 'zod';
import { CallgateError } from '../../config/errors.ts';
import { formatIssues } from '../../config/load.ts';
import { observeWithExemplar } from '../../config/metrics.ts';
import type { Logger } from '../../config/log.ts';
import type { ActionConfig, Config, TenantConfig } from '../../config/schema.ts';
import {
  admissionDecisions,
  admissionLatency,
  compensations,
  duplicateSuppressions,
} from '../action-metrics.ts';
import { IdempotencyConflictError } from '../ledger/ledger-errors.ts';
import { newOperationId } from '../ledger/operation-id.ts';
import type { ConversationScope, OperationState } from '../ledger/operation.ts';
import type { OperationLedger, SendingDurability } from '../ledger/operation-ledger.ts';
import type { Provider } from '../providers/provider.ts';
import {
  executionQueueFor,
  type ExecutionQueueName,
  type OperationJobData,
  type OperationQueues,
} from '../queues/operation-queues.ts';
import { admissionMode, capacityFor, decideWhenFull, type BusyReason } from './backpressure.ts';
import {
  deriveCoalesceKeyOf,
  deriveIdempotencyKeyOf,
  intentOf,
  normalizeArguments,
  paramsHashOf,
  type IntentFields,
} from './idempotency.ts';

/** Which arguments make two requests of `action` one intent (see actionSchema `intent`). */
export function intentFieldsOf(
  action: { readonly intent?: IntentFields },
  request: Pick<AdmissionRequest, 'intentFields'>,
): IntentFields {
  return (
    action.intent ??
    (request.intentFields !== undefined && request.intentFields.length > 0
      ? request.intentFields
      : 'all')
  );
}

/** Arguments above this size are refused: tool arguments are small, and the ledger keeps them. */
export const MAX_ARGUMENT_BYTES = 16_384;
/** Session ids become parts of Redis keys: a safe alphabet, bounded length. */
const SAFE_ID = /^[A-Za-z0-9_.-]{1,128}$/;

export interface AdmissionRequest {
  readonly tenantId: string;
  readonly action: string;
  readonly args: unknown;
  readonly scope: ConversationScope;
  /**
   * The intent fields the tool declares (agents/agent.ts); the action's configured `intent` wins
   * over them, and without either every argument is part of the intent.
   */
  readonly intentFields?: readonly string[];
  /** An explicit key (an API client's Idempotency-Key); derived when absent. */
  readonly idempotencyKey?: string;
  /** The committed operation this one undoes. */
  readonly compensates?: string;
}

export type AdmissionDecision =
  | {
      readonly type: 'started';
      readonly operationId: string;
      readonly idempotencyKey: string;
      readonly queued: boolean;
    }
  | { readonly type: 'duplicate'; readonly operationId: string; readonly state: OperationState }
  | { readonly type: 'coalesced'; readonly operationId: string; readonly state: OperationState }
  | { readonly type: 'busy'; readonly reason: BusyReason; readonly retryAfterMs: number }
  | { readonly type: 'degraded'; readonly fallback: string };

export interface AdmissionOptions {
  readonly config: Pick<Config, 'tenants'>;
  readonly ledger: OperationLedger;
  readonly queues: OperationQueues;
  /** Provider declarations (idempotency-key support) by provider name. */
  readonly providers: ReadonlyMap<string, Pick<Provider, 'honoursIdempotencyKeys'>>;
  /** Argument schemas by action name; requests failing them are refused before anything is written. */
  readonly schemas?: ReadonlyMap<string, ZodType>;
  readonly now?: () => number;
  /** Where a failed enqueue is reported (the outbox sweep enqueues it later). */
  readonly log?: Logger;
  /**
   * How an admitted mutation is made durable before the caller is told it started (config
   * redis.durability): one that cannot be is taken back and answered busy, so a primary lost
   * before its replica caught up cannot lose an operation the caller heard had started
   * (test/integration/exactly-once/admission-durable.test.ts).
   */
  readonly durability?: SendingDurability;
}

/** How soon a caller told busy because Redis could not make the admission durable may ask again. */
const NOT_DURABLE_RETRY_MS = 1_000;

export class Admission {
  private readonly tenants: ReadonlyMap<string, TenantConfig>;
  private readonly now: () => number;
  /** Enqueues of admitted operations still on their way to Redis. */
  private readonly enqueues = new Set<Promise<void>>();

  constructor(private readonly options: AdmissionOptions) {
    this.tenants = new Map(options.config.tenants.map((t) => [t.id, t]));
    this.now = options.now ?? Date.now;
  }

  action(tenantId: string, action: string): ActionConfig {
    const tenant = this.tenants.get(tenantId);
    if (!tenant) throw new CallgateError('CALLGATE_ERR_OP_UNKNOWN_TENANT', { tenant: tenantId });
    const config = tenant.actions[action];
    if (!config)
      throw new CallgateError('CALLGATE_ERR_OP_UNKNOWN_ACTION', { tenant: tenantId, action });
    return config;
  }

  providerIdempotent(action: ActionConfig): boolean {
    return (
      action.providerIdempotent ??
      this.options.providers.get(action.provider)?.honoursIdempotencyKeys ??
      false
    );
  }

  async admit(request: AdmissionRequest): Promise<AdmissionDecision> {
    const started = performance.now();
    const action = this.action(request.tenantId, request.action);
    const outcome = (decision: string) =>
      admissionDecisions.labels(request.tenantId, request.action, action.policy, decision).inc();
    let args: Readonly<Record<string, unknown>>;
    let canonical: string;
    try {
      ({ args, canonical } = this.validate(request));
    } catch (error) {
      outcome('invalid');
      throw error;
    }
    const now = this.now();
    const operationId = newOperationId(now);
    const mode = admissionMode(action);
    // The key and the conflict check cover the intent fields only; all arguments are stored and
    // sent to the provider (those of the first request, for a duplicate).
    const fields = intentFieldsOf(action, request);
    const intent = fields === 'all' ? canonical : intentOf(fields, args);
    const idempotencyKey =
      request.idempotencyKey ??
      deriveIdempotencyKeyOf(
        { tenantId: request.tenantId, action: request.action, sessionId: request.scope.sessionId },
        fields,
        intent,
      );
    const providerIdempotent = this.providerIdempotent(action);
    let result;
    try {
      result = await this.options.ledger.admit({
        operationId,
        tenantId: request.tenantId,
        action: request.action,
        kind: action.kind,
        provider: action.provider,
        providerOperation: action.operation ?? request.action,
        idempotencyKey,
        paramsHash: paramsHashOf(intent),
        params: args,
        scope: request.scope,
        providerIdempotent,
        money: action.money,
        admissionDeadlineAt: now + action.admissionDeadlineMs,
        deadlineAt: now + action.deadlineMs,
        compensates: request.compensates,
        mode,
        coalesceKey:
          mode === 'coalesce'
            ? deriveCoalesceKeyOf(request.tenantId, request.action, canonical)
            : undefined,
        capacity: capacityFor(action),
        budgetWindowMs: action.retry.budgetWindowSeconds * 1000,
      });
    } catch (error) {
      if (error instanceof IdempotencyConflictError) outcome('conflict');
      throw error;
    }
    let decision: AdmissionDecision;
    switch (result.type) {
      case 'admitted': {
        if (
          action.kind === 'mutation' &&
          !(await this.durable({
            operationId,
            tenantId: request.tenantId,
            action: request.action,
            idempotencyKey,
            scope: request.scope,
          }))
        ) {
          decision = { type: 'busy', reason: 'not_durable', retryAfterMs: NOT_DURABLE_RETRY_MS };
          break;
        }
        this.enqueue(executionQueueFor(action.kind, providerIdempotent), {
          operationId,
          tenantId: request.tenantId,
          action: request.action,
        });
        if (request.compensates !== undefined)
          compensations.labels(request.action, 'admitted').inc();
        decision = {
          type: 'started',
          operationId,
          idempotencyKey,
          queued: result.activeBefore >= action.maxConcurrent,
        };
        break;
      }
      case 'duplicate':
        duplicateSuppressions.labels(request.action, 'duplicate').inc();
        decision = { type: 'duplicate', operationId: result.operationId, state: result.state };
        break;
      case 'coalesced':
        duplicateSuppressions.labels(request.action, 'coalesced').inc();
        decision = { type: 'coalesced', operationId: result.operationId, state: result.state };
        break;
      case 'full':
        decision = decideWhenFull(action);
        break;
    }
    outcome(decision.type === 'busy' ? `busy_${decision.reason}` : decision.type);
    observeWithExemplar(
      admissionLatency,
      { action: request.action },
      (performance.now() - started) / 1000,
      {
        session_id: request.scope.sessionId,
        operation_id: 'operationId' in decision ? decision.operationId : undefined,
      },
    );
    return decision;
  }

  /**
   * Whether the admission is durable, or was made so. One that cannot be is taken back (nothing
   * admitted, the key free again); one a worker started meanwhile stands, since its worker makes
   * its own sending mark durable before the request leaves. A take-back that fails (Redis away)
   * counts as taken back: the caller is told busy, and a repeat finds the operation if it survived.
   */
  private async durable(op: Parameters<OperationLedger['withdrawAdmission']>[0]): Promise<boolean> {
    const { ledger, durability, log } = this.options;
    if (durability === undefined || durability.mode === 'none') return true;
    const outcome = await ledger.writesDurable(durability);
    if (outcome.ok) return true;
    try {
      if (!(await ledger.withdrawAdmission(op))) return true;
      log?.warn('admission taken back: it could not be made durable', {
        operation_id: op.operationId,
        reason: outcome.reason,
      });
    } catch (error) {
      log?.warn('admission not durable, and taking it back failed', {
        operation_id: op.operationId,
        reason: outcome.reason,
        error: error instanceof Error ? error.message : String(error),
      });
    }
    return false;
  }

  /** Resolves when every enqueue started so far has landed or failed (before closing the queues). */
  async drain(): Promise<void> {
    while (this.enqueues.size > 0) await Promise.all(this.enqueues);
  }

  /**
   * Enqueues an admitted operation without holding up its decision. Once the job exists the
   * operation leaves the outbox (gathered and not awaited: a lost clear only makes the sweep find a
   * job that exists, a no-op). A failed enqueue leaves it in the outbox for the sweep.
   */
  private enqueue(queue: ExecutionQueueName, job: OperationJobData): void {
    const { queues, ledger, log } = this.options;
    const pending = queues
      .enqueueExecution(queue, job)
      .then(
        () => ledger.clearOutboxSoon(job.tenantId, job.operationId),
        (error: unknown) => {
          log?.warn('enqueue failed; the outbox sweep will enqueue the operation', {
            operation_id: job.operationId,
            error: error instanceof Error ? error.message : String(error),
          });
        },
      )
      .finally(() => this.enqueues.delete(pending));
    this.enqueues.add(pending);
  }

  /** Checks ids, shape and size, and the action's schema; returns the arguments and their canonical JSON. */
  private validate(request: AdmissionRequest): {
    args: Readonly<Record<string, unknown>>;
    canonical: string;
  } {
    for (const [name, id] of [
      ['session id', request.scope.sessionId],
      ['gateway id', request.scope.ownerGateway],
    ] as const) {
      if (!SAFE_ID.test(id))
        throw new CallgateError('CALLGATE_ERR_OP_INVALID_ID', {
          id,
          reason: `${name} must be 1-128 characters of A-Z a-z 0-9 _ . -`,
        });
    }
    if (request.idempotencyKey !== undefined && !SAFE_ID.test(request.idempotencyKey)) {
      throw new CallgateError('CALLGATE_ERR_OP_INVALID_ID', {
        id: request.idempotencyKey,
        reason: 'idempotency key must be 1-128 characters of A-Z a-z 0-9 _ . -',
      });
    }
    if (request.args === null || typeof request.args !== 'object' || Array.isArray(request.args)) {
      throw new CallgateError('CALLGATE_ERR_OP_INVALID_ARGUMENTS', {
        action: request.action,
        problems: 'arguments must be a JSON object',
      });
    }
    let text: string;
    try {
      text = JSON.stringify(normalizeArguments(request.args));
    } catch (error) {
      throw new CallgateError('CALLGATE_ERR_OP_INVALID_ARGUMENTS', {
        action: request.action,
        problems: error instanceof Error ? error.message : String(error),
      });
    }
    const size = Buffer.byteLength(text);
    if (size > MAX_ARGUMENT_BYTES)
      throw new CallgateError('CALLGATE_ERR_OP_PAYLOAD_TOO_LARGE', {
        action: request.action,
        size,
        limit: MAX_ARGUMENT_BYTES,
      });
    const schema = this.options.schemas?.get(request.action);
    if (schema) {
      const parsed = schema.safeParse(request.args);
      if (!parsed.success) {
        throw new CallgateError('CALLGATE_ERR_OP_INVALID_ARGUMENTS', {
          action: request.action,
          problems: formatIssues(parsed.error.issues).join('; '),
        });
      }
      const args = parsed.data as Record<string, unknown>;
      return { args, canonical: JSON.stringify(normalizeArguments(args)) };
    }
    return { args: request.args as Record<string, unknown>, canonical: text };
  }
}
