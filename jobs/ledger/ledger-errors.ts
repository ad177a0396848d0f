/**
 * Errors the ledger raises where callers steer by them, and the one function that maps the Lua
 * scripts' error replies to them.
 */
import { CallgateError } from '../../config/errors.ts';
import type { OperationState } from './operation.ts';

export class OperationNotFoundError extends CallgateError {
  constructor(readonly operationId: string) {
    super('CALLGATE_ERR_OP_NOT_FOUND', { operationId });
    this.name = 'OperationNotFoundError';
  }
}

export class IllegalTransitionError extends CallgateError {
  constructor(
    readonly operationId: string,
    readonly from: OperationState,
    readonly to: OperationState,
  ) {
    super('CALLGATE_ERR_OP_ILLEGAL_TRANSITION', { operationId, from, to });
    this.name = 'IllegalTransitionError';
  }
}

/** A worker whose attempt was superseded (it stalled and another took over) tried to finish. */
export class StaleAttemptError extends CallgateError {
  constructor(
    readonly operationId: string,
    readonly attempt: number,
    readonly current: number,
  ) {
    super('CALLGATE_ERR_OP_STALE_ATTEMPT', { operationId, attempt, current });
    this.name = 'StaleAttemptError';
  }
}

export class IdempotencyConflictError extends CallgateError {
  constructor(
    readonly idempotencyKey: string,
    readonly operationId: string,
  ) {
    super('CALLGATE_ERR_OP_IDEMPOTENCY_CONFLICT', { idempotencyKey, operationId });
    this.name = 'IdempotencyConflictError';
  }
}

/** Maps an `ERR_*` reply of a ledger script to its error; returns undefined for an `OK` reply. */
export function scriptError(
  reply: readonly (string | number | null)[],
  context: { operationId: string; to?: OperationState; attempt?: number },
): CallgateError | undefined {
  const [status, detail] = reply;
  switch (status) {
    case 'OK':
      return undefined;
    case 'ERR_NOT_FOUND':
      return new OperationNotFoundError(context.operationId);
    case 'ERR_ILLEGAL':
      return new IllegalTransitionError(
        context.operationId,
        String(detail) as OperationState,
        context.to ?? (String(detail) as OperationState),
      );
    case 'ERR_STALE':
      return new StaleAttemptError(context.operationId, context.attempt ?? -1, Number(detail));
    default:
      return new CallgateError('CALLGATE_ERR_OP_ILLEGAL_TRANSITION', {
        operationId: context.operationId,
        from: String(status),
        to: context.to ?? '?',
      });
  }
}
