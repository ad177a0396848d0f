/**
 * Compensation: undoing a committed operation with a new operation (cancel_booking for a booking),
 * admitted like any other and retried within its own action's retry policy. The undo is recorded
 * as owed on the original before it is admitted, so one that cannot be admitted now (busy, full,
 * past its admission deadline) or whose admission is lost in a crash is admitted later by the
 * owed-compensation pass, never dropped. A compensation that ends without effect releases its link
 * (owed-compensation-pass.ts), so a later undo can be tried under the next idempotency key.
 * Pinned by test/integration/actions/compensation-owed.test.ts and compensation-failed.test.ts.
 */
import { isCallgateError } from '../../config/errors.ts';
import type { Logger } from '../../config/log.ts';
import { compensations } from '../action-metrics.ts';
import type { Admission, AdmissionDecision, AdmissionRequest } from '../admission/admission.ts';
import type { Operation, OperationState } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';

/** What an undo asks for: the compensating action, its arguments and the call it is for. */
export type CompensationRequest = Omit<
  AdmissionRequest,
  'tenantId' | 'compensates' | 'idempotencyKey'
>;

export type CompensationDecision =
  | {
      readonly type: 'admitted';
      readonly decision: Extract<AdmissionDecision, { operationId: string }>;
      readonly compensates: string;
    }
  /** Not admitted now (busy, degraded, a try that just ended): admitted later by the owed-compensation pass. */
  | {
      readonly type: 'owed';
      readonly compensates: string;
      readonly reason: string;
      readonly retryAfterMs?: number;
    }
  /** The last try ended without effect before it was ever linked: the original still stands. */
  | {
      readonly type: 'failed';
      readonly compensates: string;
      readonly compensationId: string;
      readonly state: OperationState;
    }
  | { readonly type: 'already_compensated'; readonly compensatedBy: string }
  | { readonly type: 'not_committed'; readonly state: OperationState };

export interface CompensatorOptions {
  readonly ledger: OperationLedger;
  readonly admission: Pick<Admission, 'admit'>;
  readonly log: Logger;
}

/**
 * The idempotency key of a compensation try: asking twice within a try gives the same operation;
 * after a try ended without effect the next one is a new operation.
 */
export function compensationKey(originalId: string, failedTries: number): string {
  return failedTries === 0 ? `comp_${originalId}` : `comp_${originalId}_${failedTries + 1}`;
}

/** A key read before another try was settled is stale; one fresh read and admission settle it. */
const STALE_KEY_RETRIES = 1;

export class Compensator {
  constructor(private readonly options: CompensatorOptions) {}

  /** Undoes `original` (COMMITTED) with `request`: admitted now, or owed and admitted later. */
  async request(
    original: Pick<Operation, 'tenantId' | 'operationId'>,
    request: CompensationRequest,
  ): Promise<CompensationDecision> {
    const { ledger } = this.options;
    const op = await ledger.require(original.tenantId, original.operationId);
    if (op.compensatedBy !== undefined)
      return { type: 'already_compensated', compensatedBy: op.compensatedBy };
    if (op.state !== 'COMMITTED') return { type: 'not_committed', state: op.state };
    const owed = await ledger.oweCompensation(op, JSON.stringify(request));
    if (owed.type === 'linked')
      return { type: 'already_compensated', compensatedBy: owed.compensationId };
    if (owed.type === 'not_committed') return { type: 'not_committed', state: owed.state };
    const decision = await this.admitOwed(
      op.tenantId,
      op.operationId,
      parseRequest(owed.request) ?? request,
      owed.tries,
    );
    if (decision.type === 'owed') {
      compensations.labels(request.action, 'owed').inc();
      this.options.log.warn(
        'compensation owed: it could not be admitted now and will be admitted later',
        { operation_id: op.operationId, action: request.action, reason: decision.reason },
      );
    }
    return decision;
  }

  /**
   * Admits an owed compensation under the key of its try and links it. A request admission refuses
   * as invalid (an unknown action, bad arguments) can never be admitted: it is no longer owed, it
   * counts as failed, and the error is raised. Other errors (Redis) leave it owed.
   */
  async admitOwed(
    tenantId: string,
    originalId: string,
    request: CompensationRequest,
    failedTries: number,
  ): Promise<CompensationDecision> {
    const { ledger, admission, log } = this.options;
    let tries = failedTries;
    for (let round = 0; ; round++) {
      let decision: AdmissionDecision;
      try {
        decision = await admission.admit({
          ...request,
          tenantId,
          compensates: originalId,
          idempotencyKey: compensationKey(originalId, tries),
        });
      } catch (error) {
        if (isCallgateError(error)) {
          await ledger.dropOwedCompensation(tenantId, originalId);
          compensations.labels(request.action, 'failed').inc();
          log.error('compensation refused at admission; the original still stands', {
            operation_id: originalId,
            action: request.action,
            error,
          });
        }
        throw error;
      }
      if (decision.type === 'busy')
        return {
          type: 'owed',
          compensates: originalId,
          reason: decision.reason,
          retryAfterMs: decision.retryAfterMs,
        };
      if (decision.type === 'degraded')
        return { type: 'owed', compensates: originalId, reason: 'degraded' };
      const link = await ledger.linkCompensation(
        { tenantId, operationId: originalId },
        decision.operationId,
      );
      switch (link.type) {
        case 'linked':
          return { type: 'admitted', decision, compensates: originalId };
        case 'other':
          return { type: 'already_compensated', compensatedBy: link.compensationId };
        case 'not_committed':
          return { type: 'not_committed', state: link.state };
        case 'try_ended':
          reportFailed(log, {
            originalId,
            compensationId: decision.operationId,
            action: request.action,
            state: link.state,
            tries: link.tries,
          });
          return {
            type: 'failed',
            compensates: originalId,
            compensationId: decision.operationId,
            state: link.state,
          };
        case 'stale_try': {
          if (round >= STALE_KEY_RETRIES)
            return { type: 'owed', compensates: originalId, reason: 'try_settling' };
          tries = (await ledger.owedCompensation(tenantId, originalId)).tries;
        }
      }
    }
  }
}

/** Counts and logs a compensation that ended without effect (the original still stands). */
export function reportFailed(
  log: Logger,
  failed: {
    originalId: string;
    compensationId: string;
    action: string;
    state: OperationState;
    tries: number;
  },
): void {
  compensations.labels(failed.action, 'failed').inc();
  log.error('compensation failed; the original operation still stands and may be undone again', {
    operation_id: failed.originalId,
    compensation_id: failed.compensationId,
    action: failed.action,
    state: failed.state,
    failed_tries: failed.tries,
  });
}

/** The stored request of an owed compensation; undefined when it is not one. */
export function parseRequest(text: string | undefined): CompensationRequest | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<CompensationRequest>;
    if (
      typeof value.action !== 'string' ||
      typeof value.scope?.sessionId !== 'string' ||
      typeof value.scope.ownerGateway !== 'string'
    )
      return undefined;
    return value as CompensationRequest;
  } catch {
    return undefined;
  }
}
