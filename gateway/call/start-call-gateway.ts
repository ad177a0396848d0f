/**
 * The gateway role inside a started process: the realtime model, shared media (one timer, one
 * playout scheduler, one port allocator), the agents' tool runtime, result delivery and the
 * janitor, the session registry, the SIP driver and the calls it answers. Each part registers its
 * stop with the process, so shutdown runs in reverse: calls end first (BYE, results out of band),
 * then signaling, the registry, the janitor, delivery, the model and the Redis connections.
 */
import { loadCallAgents, type CallAgents } from '../../agents/agent-module.ts';
import { agentRelease, AgentReleases } from '../../agents/agent-versions.ts';
import { AuditLog } from '../../agents/audit.ts';
import { Janitor } from '../../agents/janitor.ts';
import { ResultDelivery } from '../../agents/result-delivery.ts';
import { ToolRuntime } from '../../agents/tool-runtime.ts';
import { ConfigError, loadConfig } from '../../config/load.ts';
import type { Logger } from '../../config/log.ts';
import type { Config } from '../../config/schema.ts';
import type { ActionLayer } from '../../jobs/action-layer.ts';
import type { ProcessContext } from '../../jobs/process-runtime.ts';
import { connect } from '../../jobs/redis/connection.ts';
import { rtpSocketsInfo } from '../media/media-metrics.ts';
import { MonotonicMediaTimer } from '../media/media-timer.ts';
import { chooseRtpSockets } from '../media/native-rtp-sockets.ts';
import { PlayoutScheduler } from '../media/playout-scheduler.ts';
import { RtpPortAllocator } from '../media/rtp-port-allocator.ts';
import { RealtimeModel } from '../realtime/realtime-model.ts';
import { createSignalingDriver } from '../sip/create-signaling-driver.ts';
import type { SignalingDriver } from '../sip/signaling-driver.ts';
import { missingEntryAgents, reloadAgents } from './agent-reload.ts';
import { CallAcceptor, type CallAcceptorOptions } from './call-acceptor.ts';
import { CallPrompts } from './call-prompts.ts';
import { CallRegistry } from './call-registry.ts';
import { monitorEventLoop, type EventLoopDelay } from './event-loop-delay.ts';
import { registerCallsApi } from './calls-api.ts';

export interface CallGateway {
  readonly driver: SignalingDriver;
  readonly calls: CallAcceptor;
  readonly model: RealtimeModel;
}

/** `agents`: read before the process started (gateway/main.ts); unset, read here. */
export async function startCallGateway(
  context: ProcessContext,
  layer: ActionLayer,
  agents?: CallAgents,
): Promise<CallGateway> {
  const { config, log, gatewayId, operator } = context;
  const prefix = config.redis.prefix;
  const tenants = config.tenants.map((t) => t.id);
  const loaded = agents ?? (await callAgents(config, log));
  const { before, after } = loaded;
  const releases = new AgentReleases(agentRelease(config, loaded.catalogue));
  const catalogue = releases.current.catalogue;

  const redis = await connect(context.redis.url, 'producer');
  // Result delivery blocks on XREADGROUP: a connection of its own, waiting for Redis forever.
  const blocking = await connect(context.redis.url, 'worker');
  context.onShutdown('gateway redis', async () => {
    redis.disconnect();
    blocking.disconnect();
  });

  const model = await RealtimeModel.start(config.model, { logger: log });
  context.onShutdown('realtime model', () => model.stop());

  const timer = new MonotonicMediaTimer();
  const scheduler = new PlayoutScheduler({
    timer,
    onError: (error) => log.error('playout tick failed', { error }),
  });
  const ports = new RtpPortAllocator({ portMin: config.rtp.portMin, portMax: config.rtp.portMax });
  // Checked before any call: `native` without the module stops the start here, `auto` says why it falls back.
  const rtpSockets = chooseRtpSockets(config.rtp.sockets);
  rtpSocketsInfo.set({ engine: rtpSockets.engine }, 1);
  if (rtpSockets.fallbackReason !== undefined)
    log.warn('native RTP sockets unavailable, using dgram (more CPU per packet)', {
      reason: rtpSockets.fallbackReason,
    });

  const audit = new AuditLog(redis, prefix, log, config.privacy.auditTtlSeconds);
  const runtime = new ToolRuntime({
    catalogue,
    tenants: new Map(config.tenants.map((t) => [t.id, t])),
    actions: layer,
    audit,
    log,
    before,
    after,
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
    prefix,
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

  const registry = new CallRegistry({
    redis,
    prefix,
    gatewayId,
    heartbeatMs: config.gateway.heartbeatMs,
    deadAfterMs: config.gateway.deadAfterMs,
    log,
    retention: config.privacy,
  });
  registry.start();
  context.onShutdown('session registry', async () => registry.stop());
  registerCallsApi(operator, {
    registry,
    audit,
    ledger: layer.ledger,
    maskCallerNumbers: config.privacy.maskCallerNumbers,
  });

  // Rendered now for G.711 μ-law (the usual trunk codec), so an apology never waits for espeak-ng.
  const prompts = new CallPrompts({ log });
  void prompts.prepare(['pcmu']);

  const driver = createSignalingDriver(config, log);
  const loop = monitorEventLoop();
  const calls = new CallAcceptor({
    media: { config: config.rtp, ports, scheduler, timer },
    model,
    catalogue,
    agents: () => releases.current,
    runtime,
    delivery,
    ledger: layer.ledger,
    registry,
    gatewayId,
    log,
    prompts,
    draining: context.draining,
    ...admissionOptions(context, loop),
  });
  registerCallCapacity(context, calls);
  registerSignalingReadiness(context, driver);
  calls.listen(driver);
  const reload = (cause: string) =>
    reloadAgents(
      {
        releases,
        running: config,
        load: () => loadConfig(),
        compile: (next) => callAgents(next, log, { fresh: true }),
        log,
      },
      cause,
    );
  const onHangup = () => void reload('SIGHUP');
  process.on('SIGHUP', onHangup);
  context.onShutdown('agent reload', async () => {
    process.off('SIGHUP', onHangup);
  });
  operator.route({
    method: 'POST',
    path: '/v1/admin/reload',
    scope: 'admin',
    handler: async () => {
      const outcome = await reload('operator');
      return { status: outcome.status === 'refused' ? 422 : 200, body: outcome };
    },
  });
  await driver.start();
  // The start (modules compiled, prompts rendered) kept the loop busy; that is not load.
  loop.reset();
  context.onShutdown('sip', () => driver.stop());
  context.onShutdown('calls', () => calls.stop());
  log.info('calls accepted', {
    driver: driver.name,
    model: model.provider,
    rtp: `${config.rtp.listen}:${config.rtp.portMin}-${config.rtp.portMax}`,
    rtp_sockets: rtpSockets.engine,
    agents_version: releases.current.version,
  });
  return { driver, calls, model };
}

/**
 * What admission and the call setup read from `gateway` (call-admission.ts), with the event loop
 * monitor that admission consults, stopped at shutdown.
 */
function admissionOptions(
  context: ProcessContext,
  loop: EventLoopDelay,
): Partial<CallAcceptorOptions> {
  const { gateway } = context.config;
  context.onShutdown('event loop monitor', async () => loop.stop());
  return {
    maxCalls: gateway.maxCalls,
    maxEventLoopDelayMs: gateway.maxEventLoopDelayMs,
    eventLoopDelayMs: loop.delayMs,
    setupTimeoutMs: gateway.setupTimeoutMs,
    retryAfterSeconds: gateway.retryAfterSeconds,
  };
}

/**
 * Readiness check `sip`: not ready while the signaling driver cannot carry calls (drachtio-server
 * not connected, or refusing the shared secret; test/e2e/drachtio-connection.test.ts).
 */
function registerSignalingReadiness(context: ProcessContext, driver: SignalingDriver): void {
  context.http.addReadinessCheck({
    name: 'sip',
    check: async () => {
      const readiness = driver.readiness();
      return readiness.ready ? undefined : readiness.reason;
    },
  });
}

/**
 * Readiness check `calls`: not ready while the gateway holds gateway.maxCalls calls, so a load
 * balancer or autoscaler sees a full gateway; the slots gauge (call-metrics.ts) says how full.
 */
function registerCallCapacity(context: ProcessContext, calls: CallAcceptor): void {
  context.http.addReadinessCheck({
    name: 'calls',
    check: async () =>
      calls.slots > 0 ? undefined : `at capacity (${calls.active.size}/${calls.maxCalls} calls)`,
  });
}

/**
 * The agents of the configuration and of its module, with their plugins. A configuration with an
 * `agents` section was checked against its tenants at load, and with its module here; one without
 * it (a worker's) has none, so a tenant that names an agent stops the gateway here rather than
 * failing each of its calls.
 * @throws ConfigError listing every problem.
 */
export async function callAgents(
  config: Config,
  log: Logger,
  options: { readonly fresh?: boolean } = {},
): Promise<CallAgents> {
  const agents = await loadCallAgents(config, { log, ...options });
  const missing = missingEntryAgents(config, agents.catalogue);
  if (missing.length > 0) throw new ConfigError('agents', missing);
  return agents;
}
