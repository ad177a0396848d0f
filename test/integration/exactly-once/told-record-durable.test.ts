/**
 * Class: a record of what the caller heard lost in a failover. A Redis primary with one replica
 * that falls behind (paused) just as a result is spoken to its end; then the primary is lost and
 * the replica promoted (clients follow through a proxy). With redis.durability `replica`, the
 * spoken record is written again until a replica has it, so the promoted node says "spoken". With
 * `none` it is gone: the ledger says the caller was never told, and the result would go out again
 * by message although the caller heard it. Real redis-servers, a real worker, the sandbox.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import type { ConversationPort, SpokenOutcome } from '../../../agents/result-delivery.ts';
import { TcpProxy } from '../../../bench/chaos/tcp-proxy.ts';
import { BOOK, booking } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { startRedisPair, type RedisPair } from '../../support/redis-pair.ts';

const TENANT = 'tenant-told-durable';

/** A caller who hears each result to its end; the replica falls behind as the last word is heard. */
class ReplicaPausingPort implements ConversationPort {
  readonly heard: string[] = [];

  constructor(private readonly pair: RedisPair) {}

  async deliver(result: { readonly operationId: string }): Promise<SpokenOutcome> {
    const firstAudioAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 50));
    this.pair.pauseReplica();
    this.heard.push(result.operationId);
    return { status: 'completed', responseId: `resp_${this.heard.length}`, firstAudioAt };
  }
}

let pair: RedisPair | undefined;
let proxy: TcpProxy | undefined;
let a: AgentsHarness | undefined;
afterEach(async () => {
  await a?.close().catch(() => undefined);
  await proxy?.close();
  await pair?.stop();
  a = undefined;
  proxy = undefined;
  pair = undefined;
});

async function speakThenFailOver(
  durability: 'none' | 'replica',
): Promise<{ harness: AgentsHarness; operationId: string }> {
  pair = await startRedisPair();
  const started = await TcpProxy.start(pair.primary.port);
  proxy = started.proxy;
  const harness = (a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: BOOK } },
    redisUrl: `redis://127.0.0.1:${started.port}`,
    redis: { durability: { mode: durability, replicas: 1, timeoutMs: 300 } },
    gatewayId: `gw-told-${durability}`,
  }));
  const session = new AgentSession({
    sessionId: `call-told-${durability}-${Date.now()}`,
    tenantId: TENANT,
    caller: '+15550177',
    ownerGateway: harness.gatewayId,
    agent: 'reservations',
  });
  const port = new ReplicaPausingPort(pair);
  harness.delivery.attach(session, port);
  const out = await harness.runtime.handle(session, {
    callId: `c-told-${durability}`,
    name: 'book_table',
    arguments: booking(),
  });
  expect(out.status).toBe('started');
  const operationId = String(out.operation_id);
  await waitFor(
    async () => (port.heard.includes(operationId) ? true : undefined),
    20_000,
    'the result heard to its end',
  );
  // The spoken record is on the primary only; the primary is lost before the replica has it.
  await new Promise((resolve) => setTimeout(resolve, 200));
  await pair.failover();
  proxy.repoint(pair.replica.port);
  proxy.cutAll();
  expect(port.heard).toEqual([operationId]);
  return { harness, operationId };
}

describe('when the replica falls behind as a result is heard, and the primary is then lost', () => {
  it(
    'should write the spoken record again until the promoted replica has it',
    { timeout: 60_000 },
    async () => {
      const { harness, operationId } = await speakThenFailOver('replica');
      const op = await waitFor(
        async () => {
          const current = await harness.h.layer.ledger.get(TENANT, operationId).catch(() => null);
          return current?.delivery?.decision === 'spoken' ? current : undefined;
        },
        10_000,
        'the spoken record on the promoted replica',
      );
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
    },
  );

  it(
    'should show why: without durability the promoted replica has no spoken record',
    { timeout: 60_000 },
    async () => {
      const { harness, operationId } = await speakThenFailOver('none');
      const op = await waitFor(
        async () =>
          (await harness.h.layer.ledger.get(TENANT, operationId).catch(() => null)) ?? undefined,
        10_000,
        'the operation on the promoted replica',
      );
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const after = await harness.h.layer.ledger.get(TENANT, operationId);
      expect(op.state).toBe('COMMITTED');
      expect(after?.delivery?.decision).not.toBe('spoken');
    },
  );
});
