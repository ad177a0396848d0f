/**
 * The operator's view of calls (on the operator listener; every route needs calls:read):
 *   GET /v1/calls                 active calls (every gateway) and the most recent ended ones
 *   GET /v1/calls/:id/timeline    one call's events on one time axis: its own milestones (SIP,
 *                                 media, model, tools), the audit trail (tool requests, gate
 *                                 decisions, deliveries) and every state of its operations
 *   GET /calls/:id                the same as a server-rendered HTML page
 */
import { z } from 'zod';
import type { AuditLog } from '../../agents/audit.ts';
import type { OperationLedger } from '../../jobs/ledger/operation-ledger.ts';
import { resourceIdParams, type OperatorServer } from '../../jobs/http/operator-server.ts';
import { maskCallerFields } from '../../config/caller-mask.ts';
import type { CallRecord, CallRegistry } from './call-registry.ts';
import { escapeHtml, renderTimelinePage } from './timeline-page.ts';

export interface CallsApiOptions {
  readonly registry: CallRegistry;
  readonly audit: AuditLog;
  readonly ledger: Pick<OperationLedger, 'listBySession' | 'history'>;
  /** privacy.maskCallerNumbers: what the API serves shows caller numbers masked. */
  readonly maskCallerNumbers?: boolean;
}

export interface TimelineEntry {
  readonly at: number;
  readonly source: 'call' | 'audit' | 'operation';
  readonly type: string;
  readonly detail: Readonly<Record<string, unknown>>;
}

function callView(record: CallRecord): Record<string, unknown> {
  return {
    session_id: record.sessionId,
    tenant_id: record.tenantId,
    sip_call_id: record.sipCallId,
    caller: record.caller,
    called_number: record.calledNumber,
    agent: record.agent,
    agent_version: record.agentVersion,
    owner_gateway: record.ownerGateway,
    state: record.state,
    started_at: record.startedAt,
    heartbeat_at: record.heartbeatAt,
    ended_at: record.endedAt,
    end_reason: record.endReason,
  };
}

/** Builds one call's timeline, oldest first; entries at the same time keep call, audit, operation order. */
export async function callTimeline(
  options: CallsApiOptions,
  record: CallRecord,
): Promise<TimelineEntry[]> {
  const entries: TimelineEntry[] = [];
  for (const { at, event } of await options.registry.events(record.sessionId)) {
    const { type, ...detail } = event;
    entries.push({ at, source: 'call', type, detail });
  }
  for (const { at, event, turnId } of await options.audit.read(record.sessionId)) {
    const { type, ...detail } = event;
    entries.push({ at, source: 'audit', type, detail: { ...detail, turn_id: turnId } });
  }
  for (const op of await options.ledger.listBySession(record.tenantId, record.sessionId)) {
    for (const step of await options.ledger.history(record.tenantId, op.operationId)) {
      entries.push({
        at: step.at,
        source: 'operation',
        type: `operation_${step.state.toLowerCase()}`,
        detail: {
          operation_id: op.operationId,
          action: op.action,
          attempt: step.attempt,
          actor: step.actor,
          reason: step.reason,
        },
      });
    }
  }
  const rank = { call: 0, audit: 1, operation: 2 } as const;
  return entries.sort((a, b) => a.at - b.at || rank[a.source] - rank[b.source]);
}

/** `?limit=` is clamped to 1..500 (100 when absent or not a number), as it always was. */
const listQuery = z.object({
  limit: z
    .string()
    .max(16)
    .optional()
    .transform((limit) => Math.min(500, Math.max(1, Number(limit ?? 100) || 100))),
});

export function registerCallsApi(http: OperatorServer, options: CallsApiOptions): void {
  const shown = <T>(body: T): T =>
    options.maskCallerNumbers === true ? maskCallerFields(body) : body;
  http.route({
    method: 'GET',
    path: '/v1/calls',
    scope: 'calls:read',
    query: listQuery,
    handler: async ({ query }) => {
      const { active, recent } = await options.registry.list(query.limit);
      return { body: shown({ active: active.map(callView), recent: recent.map(callView) }) };
    },
  });

  const view = async (id: string) => {
    const record = await options.registry.get(id);
    if (record === undefined) return undefined;
    const operations = await options.ledger.listBySession(record.tenantId, record.sessionId);
    return shown({
      call: callView(record),
      operations: operations.map((op) => ({
        operation_id: op.operationId,
        action: op.action,
        state: op.state,
        delivery: op.delivery,
      })),
      timeline: await callTimeline(options, record),
    });
  };

  http.route({
    method: 'GET',
    path: '/v1/calls/:id/timeline',
    scope: 'calls:read',
    params: resourceIdParams,
    handler: async ({ params: { id } }) => {
      const body = await view(id);
      return body === undefined
        ? { status: 404, body: { error: 'not_found', message: `no call ${id}` } }
        : { body };
    },
  });

  http.route({
    method: 'GET',
    path: '/calls/:id',
    scope: 'calls:read',
    params: resourceIdParams,
    handler: async ({ params: { id } }) => {
      const body = await view(id);
      const html =
        body === undefined
          ? `<!doctype html><title>not found</title><p>No call ${escapeHtml(id)}.</p>`
          : renderTimelinePage(body);
      return {
        status: body === undefined ? 404 : 200,
        contentType: 'text/html; charset=utf-8',
        body: html,
      };
    },
  });
}
