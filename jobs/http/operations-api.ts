/**
 * The operations admin API (on the operator listener; reads need operations:read, writes
 * operations:write):
 *   GET  /v1/operations/:id                         state, history, result, links
 *   GET  /v1/operations?session_id=&tenant=          operations of a call
 *   GET  /v1/operations?state=UNKNOWN[&tenant=]      operations currently UNKNOWN
 *   GET  /v1/operations?idempotency_key=K[&tenant=]  the operation holding a key
 *   POST /v1/operations/:id/reconcile                ask the provider now (UNKNOWN only)
 *   POST /v1/operations/:id/notify/redrive           send again an out-of-band message that gave up
 */
import { z } from 'zod';
import { CallgateError } from '../../config/errors.ts';
import type { Operation } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import type { OutOfBandQueue } from '../notify/out-of-band.ts';
import type { OperationQueues } from '../queues/operation-queues.ts';
import { resourceIdParams, type OperatorServer } from './operator-server.ts';

/** A query value given once; a repeated key is a bad request, not a silent pick. */
const queryValue = z.string().max(512).optional();

const listQuery = z.object({
  session_id: queryValue,
  state: queryValue,
  idempotency_key: queryValue,
  tenant: queryValue,
});

export function registerOperationsApi(
  http: OperatorServer,
  deps: {
    ledger: OperationLedger;
    queues: OperationQueues;
    outOfBand: Pick<OutOfBandQueue, 'redrive'>;
    tenants: readonly string[];
  },
): void {
  const { ledger, queues, outOfBand, tenants } = deps;
  const tenantsOf = (tenant: string | undefined): readonly string[] => {
    if (tenant === undefined) return tenants;
    if (!tenants.includes(tenant))
      throw new CallgateError('CALLGATE_ERR_OP_UNKNOWN_TENANT', { tenant });
    return [tenant];
  };

  http.route({
    method: 'GET',
    path: '/v1/operations/:id',
    scope: 'operations:read',
    params: resourceIdParams,
    handler: async ({ params: { id } }) => {
      const op = await ledger.getById(id);
      if (!op) throw new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId: id });
      return {
        body: { operation: view(op), history: await ledger.history(op.tenantId, op.operationId) },
      };
    },
  });

  http.route({
    method: 'GET',
    path: '/v1/operations',
    scope: 'operations:read',
    query: listQuery,
    handler: async ({ query }) => {
      const { session_id: sessionId, state, idempotency_key: key } = query;
      const found: Operation[] = [];
      for (const tenant of tenantsOf(query.tenant)) {
        if (sessionId !== undefined) found.push(...(await ledger.listBySession(tenant, sessionId)));
        else if (key !== undefined) {
          const op = await ledger.findByIdempotencyKey(tenant, key);
          if (op) found.push(op);
        } else if (state === 'UNKNOWN')
          found.push(...(await ledger.listUnknown(tenant)).map((row) => row.operation));
        else
          throw new CallgateError('CALLGATE_ERR_HTTP_BAD_REQUEST', {
            reason: 'give session_id, idempotency_key or state=UNKNOWN',
          });
      }
      return { body: { operations: found.map(view) } };
    },
  });

  http.route({
    method: 'POST',
    path: '/v1/operations/:id/reconcile',
    scope: 'operations:write',
    params: resourceIdParams,
    handler: async ({ params: { id } }) => {
      const op = await ledger.getById(id);
      if (!op) throw new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId: id });
      if (op.state !== 'UNKNOWN')
        throw new CallgateError('CALLGATE_ERR_OP_RECONCILE_REFUSED', {
          operationId: id,
          state: op.state,
        });
      await ledger.setFenced(op, ['UNKNOWN'], undefined, { reconcile_stuck: '0' });
      await queues.enqueueReconcile(
        { operationId: op.operationId, tenantId: op.tenantId, tries: 0, reason: 'operator' },
        0,
        true,
      );
      return { status: 202, body: { operation: view(op), reconcile: 'requested' } };
    },
  });

  // Channels that gave up are queued again (unbounded: an operator decides); delivered ones are not
  // sent twice, and one still being retried is left to its retries.
  http.route({
    method: 'POST',
    path: '/v1/operations/:id/notify/redrive',
    scope: 'operations:write',
    params: resourceIdParams,
    handler: async ({ params: { id } }) => {
      const op = await ledger.getById(id);
      if (!op) throw new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId: id });
      const channels = await outOfBand.redrive(op.tenantId, op.operationId, 'operator');
      if (!Object.values(channels).includes('requeued')) {
        const states = Object.entries(op.outOfBand ?? {}).map(
          ([channel, record]) => `${channel}: ${record.state}`,
        );
        throw new CallgateError('CALLGATE_ERR_OOB_REDRIVE_REFUSED', {
          operationId: id,
          channels: states.length > 0 ? states.join(', ') : 'none queued',
        });
      }
      return {
        status: 202,
        body: {
          operation: view((await ledger.get(op.tenantId, op.operationId)) ?? op),
          redrive: channels,
        },
      };
    },
  });
}

/** The public shape of an operation: everything but internal bookkeeping. */
function view(op: Operation): Record<string, unknown> {
  return {
    operation_id: op.operationId,
    tenant_id: op.tenantId,
    action: op.action,
    state: op.state,
    attempt: op.attempt,
    idempotency_key: op.idempotencyKey,
    params: op.params,
    session_id: op.scope.sessionId,
    caller: op.scope.caller,
    caller_verified: op.scope.callerVerified,
    called: op.scope.called,
    turn_id: op.scope.turnId,
    provider_call_id: op.scope.providerCallId,
    response_id: op.scope.responseId,
    agent: op.scope.agent,
    agent_version: op.scope.agentVersion,
    goal: op.scope.goal,
    owner_gateway: op.scope.ownerGateway,
    result: op.result,
    error: op.error,
    provider_ref: op.providerRef,
    compensates: op.compensates,
    compensated_by: op.compensatedBy,
    delivery: op.delivery,
    out_of_band: op.outOfBand,
    created_at: op.createdAt,
    started_at: op.startedAt,
    committed_at: op.committedAt,
    finished_at: op.finishedAt,
    reconciled_at: op.reconciledAt,
    deadline_at: op.deadlineAt,
  };
}
