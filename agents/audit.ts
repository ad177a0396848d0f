/**
 * The audit trail of a call: every step from a tool request to the caller hearing (or not) its
 * result, with the correlation ids that tie logs, operations and metrics together. Kept per call
 * in Redis for replay (`{prefix}:audit:<id>`, a list that expires privacy.auditTtlSeconds after
 * its last record), and logged.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../config/log.ts';
import { AUDIT_TTL_DEFAULT_SECONDS } from '../config/schema.ts';

export type AuditEvent =
  | { type: 'tool_requested'; tool: string; callId: string; responseId?: string; args: unknown }
  | { type: 'tool_refused'; tool: string; callId: string; by: string; reason: string }
  | {
      type: 'tool_answered';
      tool: string;
      callId: string;
      status: string;
      operationId?: string;
      idempotencyKey?: string;
    }
  | {
      type: 'superseded';
      operationId: string;
      by: string;
      action: 'cancelled' | 'compensating' | 'left_running';
      detail?: string;
    }
  | {
      type: 'gate_decision';
      operationId: string;
      state: string;
      decision: string;
      reasons: readonly string[];
      agent: string;
    }
  | {
      type: 'delivered';
      operationId: string;
      channel: 'voice' | 'out_of_band';
      responseId?: string;
      commitToAudibleMs?: number;
    }
  | { type: 'delivery_interrupted'; operationId: string; responseId?: string }
  | { type: 'handoff'; from: string; to: string; pending: number }
  | { type: 'transfer'; target: string; pending: number };

export interface AuditRecord {
  readonly at: number;
  readonly sessionId: string;
  readonly turnId?: number;
  readonly event: AuditEvent;
}

export class AuditLog {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly log: Logger,
    /** privacy.auditTtlSeconds: by default as long as the ledger keeps an ordinary operation. */
    private readonly ttlSeconds = AUDIT_TTL_DEFAULT_SECONDS,
  ) {}

  key(sessionId: string): string {
    return `${this.prefix}:audit:${sessionId}`;
  }

  async record(sessionId: string, event: AuditEvent, turnId?: number): Promise<void> {
    const record: AuditRecord = { at: Date.now(), sessionId, turnId, event };
    this.log.info(`audit ${event.type}`, {
      session_id: sessionId,
      turn_id: turnId,
      ...event,
      type: undefined,
      event: event.type,
    });
    await this.redis
      .multi()
      .rpush(this.key(sessionId), JSON.stringify(record))
      .expire(this.key(sessionId), this.ttlSeconds)
      .exec();
  }

  async read(sessionId: string): Promise<AuditRecord[]> {
    return (await this.redis.lrange(this.key(sessionId), 0, -1)).map(
      (line) => JSON.parse(line) as AuditRecord,
    );
  }
}
