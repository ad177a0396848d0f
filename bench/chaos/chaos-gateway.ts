/**
 * A chaos gateway process: the gateway side of callgate without SIP and RTP (too heavy at this
 * scale on a small machine): the action layer in gateway role, the tool runtime, result delivery
 * and the janitor, assembled as gateway/call/start-call-gateway.ts assembles them, and simulated
 * calls in place of real ones. The run sends call plans over the IPC channel; what each caller
 * heard goes to this process's journal (journal.ts).
 *
 *   CALLGATE_CONFIG, REDIS_URL, CALLGATE_GATEWAY_ID   as for any callgate process
 *   CHAOS_JOURNAL_DIR                                 where the journal file goes
 */
import { agentCatalogue } from '../../agents/agent-config.ts';
import { AuditLog } from '../../agents/audit.ts';
import { Janitor } from '../../agents/janitor.ts';
import { ResultDelivery } from '../../agents/result-delivery.ts';
import { ToolRuntime } from '../../agents/tool-runtime.ts';
import { EXAMPLE_CONFIG_PATH, loadConfig } from '../../config/load.ts';
import { startProcess } from '../../jobs/process-runtime.ts';
import { connect } from '../../jobs/redis/connection.ts';
import { startActionLayer } from '../../jobs/worker-main.ts';
import type { CallPlan } from './call-plan.ts';
import { CallJournal } from './journal.ts';
import { SimulatedCall } from './simulated-call.ts';

export interface GatewayMessage {
  readonly type: 'call';
  readonly plan: CallPlan;
}

async function main(): Promise<void> {
  const journalDir = process.env.CHAOS_JOURNAL_DIR;
  if (journalDir === undefined || process.send === undefined)
    throw new Error(
      'a chaos gateway runs under the chaos run (CHAOS_JOURNAL_DIR and an IPC channel)',
    );
  const context = await startProcess('gateway');
  const { config, log, gatewayId } = context;
  const tenants = config.tenants.map((t) => t.id);
  const layer = await startActionLayer(context, { runWorkers: false });

  const redis = await connect(context.redis.url, 'producer');
  const blocking = await connect(context.redis.url, 'worker');
  context.onShutdown('gateway redis', async () => {
    redis.disconnect();
    blocking.disconnect();
  });
  // The run's configuration carries only the actions it drives; its calls are the example's agents.
  const catalogue = agentCatalogue(loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} }));
  const audit = new AuditLog(redis, config.redis.prefix, log);
  const runtime = new ToolRuntime({
    catalogue,
    tenants: new Map(config.tenants.map((t) => [t.id, t])),
    actions: layer,
    audit,
    log,
  });
  const delivery = new ResultDelivery({
    redis: blocking,
    commands: redis,
    ledger: layer.ledger,
    gatewayId,
    tenants,
    catalogue,
    outOfBand: layer.outOfBand,
    audit,
    log,
    pauseSuspectMs: config.gateway.deadAfterMs - config.gateway.heartbeatMs,
    durability: config.redis.durability,
  });
  await delivery.start();
  context.onShutdown('result delivery', () => delivery.stop());
  const janitor = new Janitor({
    redis,
    prefix: config.redis.prefix,
    gatewayId,
    tenants,
    delivery,
    ledger: layer.ledger,
    heartbeatMs: config.gateway.heartbeatMs,
    deadAfterMs: config.gateway.deadAfterMs,
    log,
  });
  await janitor.start();
  context.onShutdown('janitor', async () => {
    await janitor.stop();
    await janitor.resign();
  });

  const journal = new CallJournal(journalDir, gatewayId);
  const calls = new Set<Promise<void>>();
  const onError = (what: string, error: unknown) =>
    log.warn(`simulated call: ${what} failed`, { error });
  process.on('message', (message: GatewayMessage) => {
    if (message.type !== 'call' || context.draining.aborted) return;
    const call = new SimulatedCall(message.plan, {
      runtime,
      delivery,
      journal,
      gatewayId,
      stallCutMs: config.rtp.stallCutMs,
      onError,
    });
    const running = call.run(context.draining).catch((error: unknown) => onError('call', error));
    calls.add(running);
    void running.finally(() => calls.delete(running));
  });
  // Stopped last of the gateway's parts (stops run in reverse): calls hang up first, their results go out of band.
  context.onShutdown('calls', async () => {
    await Promise.all(calls);
    journal.close();
  });
  await context.markStarted();
  log.info('chaos gateway ready', { tenants: tenants.length });
  process.send({ type: 'ready' });
}

await main();
