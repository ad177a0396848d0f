/**
 * The agent side over a real action layer: tool runtime, result delivery and janitor, with a
 * conversation port that records what the caller would be told (and can be told to be cut off).
 */
import { Redis } from 'ioredis';
import type { AgentCatalogue } from '../../agents/agent.ts';
import { AgentSession } from '../../agents/agent-session.ts';
import { AuditLog } from '../../agents/audit.ts';
import { Janitor } from '../../agents/janitor.ts';
import {
  ResultDelivery,
  type ConversationPort,
  type SpokenOutcome,
} from '../../agents/result-delivery.ts';
import { ToolRuntime } from '../../agents/tool-runtime.ts';
import { quietLog, startHarness, type Harness, type HarnessOptions } from './action-harness.ts';
import { exampleCatalogue } from './example-agents.ts';
import type { SinkMessage } from '../../jobs/providers/sandbox/message-sink.ts';
import { sandboxMessages } from './sandbox-messages.ts';

export interface Spoken {
  readonly operationId: string;
  readonly message: string;
  readonly status: SpokenOutcome['status'];
  readonly at: number;
}

/** Records deliveries; `cutOff` makes the next n deliveries end cancelled, as a barge-in would. */
export class RecordingPort implements ConversationPort {
  readonly spoken: Spoken[] = [];
  cutOff = 0;
  private responses = 0;

  async deliver(result: { operationId: string; message: string }): Promise<SpokenOutcome> {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const status = this.cutOff > 0 ? 'cancelled' : 'completed';
    if (this.cutOff > 0) this.cutOff--;
    this.spoken.push({
      operationId: result.operationId,
      message: result.message,
      status,
      at: Date.now(),
    });
    this.responses++;
    return { status, responseId: `resp_${this.responses}`, firstAudioAt: Date.now() };
  }

  completed(operationId: string): Spoken[] {
    return this.spoken.filter((s) => s.operationId === operationId && s.status === 'completed');
  }
}

export interface AgentsHarness {
  readonly h: Harness;
  readonly runtime: ToolRuntime;
  readonly delivery: ResultDelivery;
  readonly audit: AuditLog;
  readonly catalogue: AgentCatalogue;
  readonly gatewayId: string;
  /** A new call with its recording port, attached to delivery. */
  /** `responseActive` answers whether the model is speaking on the call (never, by default). */
  call(
    tenantId: string,
    agent?: string,
    probes?: { responseActive?: () => boolean },
  ): { session: AgentSession; port: RecordingPort };
  janitor(gatewayId: string): Janitor;
  close(): Promise<void>;
}

export async function startAgentsHarness(
  options: HarnessOptions & { gatewayId?: string },
): Promise<AgentsHarness> {
  const h = await startHarness(options);
  const gatewayId = options.gatewayId ?? 'gw-test';
  // The harness's own Redis (a test may give it a primary behind a proxy, or a pair).
  const connect = () => new Redis(h.config.redis.url ?? '', { maxRetriesPerRequest: null });
  const redis: Redis = connect();
  const blocking: Redis[] = [];
  const catalogue = exampleCatalogue();
  const audit = new AuditLog(redis, h.prefix, quietLog);
  const tenants = new Map(h.config.tenants.map((t) => [t.id, t]));
  const runtime = new ToolRuntime({ catalogue, tenants, actions: h.layer, audit, log: quietLog });
  const makeDelivery = (id: string) => {
    const connection = connect();
    blocking.push(connection);
    return new ResultDelivery({
      redis: connection,
      commands: redis,
      ledger: h.layer.ledger,
      gatewayId: id,
      tenants: [...tenants.keys()],
      catalogue,
      outOfBand: h.layer.outOfBand,
      audit,
      log: quietLog,
      durability: h.config.redis.durability,
    });
  };
  const delivery = makeDelivery(gatewayId);
  await delivery.start();
  const janitors: Janitor[] = [];
  let calls = 0;
  return {
    h,
    runtime,
    delivery,
    audit,
    catalogue,
    gatewayId,
    call: (tenantId, agent = 'reservations', probes = {}) => {
      calls++;
      const session = new AgentSession({
        sessionId: `call-${Date.now()}-${calls}`,
        tenantId,
        caller: '+15550100',
        ownerGateway: gatewayId,
        agent,
        ...probes,
      });
      const port = new RecordingPort();
      delivery.attach(session, port);
      return { session, port };
    },
    janitor: (id) => {
      const janitor = new Janitor({
        redis,
        prefix: h.prefix,
        gatewayId: id,
        tenants: [...tenants.keys()],
        delivery: makeDelivery(id),
        ledger: h.layer.ledger,
        heartbeatMs: 100,
        deadAfterMs: 300,
        log: quietLog,
      });
      janitors.push(janitor);
      return janitor;
    },
    close: async () => {
      for (const j of janitors) await j.stop();
      await delivery.stop();
      for (const c of blocking) c.disconnect();
      redis.disconnect();
      await h.close();
    },
  };
}

export function messages(h: Harness, operationId: string): Promise<SinkMessage[]> {
  return sandboxMessages(h.sandbox.url, operationId);
}
