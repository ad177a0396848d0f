/**
 * The gateway's call path in the test process, for races that need a hand on the model: the
 * built-in SIP stack on a free loopback port, real RTP, a RealtimeSimulator the test owns (it can
 * drop connections), the agents harness (real Redis, the sandbox over HTTP) and a real worker
 * process running the operations.
 */
import { AuditLog } from '../../agents/audit.ts';
import { sipSchema, type RtpConfig } from '../../config/schema.ts';
import { MonotonicMediaTimer } from '../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../gateway/media/playout-scheduler.ts';
import { RtpPortAllocator } from '../../gateway/media/rtp-port-allocator.ts';
import { OpenAIRealtimeSession } from '../../gateway/realtime/openai-realtime-session.ts';
import type { SessionOptions } from '../../gateway/realtime/realtime-model.ts';
import { RealtimeSimulator } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { parseSimulatorScript } from '../../gateway/realtime/simulator/simulator-script.ts';
import { BuiltinSignalingDriver } from '../../gateway/sip/builtin-driver.ts';
import { CallAcceptor } from '../../gateway/call/call-acceptor.ts';
import type { CallEvent } from '../../gateway/call/call-events.ts';
import { CallRegistry } from '../../gateway/call/call-registry.ts';
import { callTimeline, type TimelineEntry } from '../../gateway/call/calls-api.ts';
import type { CallSession } from '../../gateway/call/call-session.ts';
import type { CallPrompts } from '../../gateway/call/call-prompts.ts';
import type { Operation } from '../../jobs/ledger/operation.ts';
import { BOOK, quietLog } from '../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../support/agents-harness.ts';
import { startTs, waitFor } from '../support/processes.ts';
import { testRedis } from '../support/redis.ts';
import { stringify } from 'yaml';

export interface InProcessGateway {
  readonly agents: AgentsHarness;
  readonly simulator: RealtimeSimulator;
  readonly calls: CallAcceptor;
  readonly ports: RtpPortAllocator;
  readonly registry: CallRegistry;
  readonly sipPort: number;
  readonly sandboxUrl: string;
  /** Every call event, in order, with the session it belongs to. */
  readonly events: { sessionId: string; at: number; event: CallEvent }[];
  readonly sessions: CallSession[];
  addFault(rule: { fault: string; service?: string; operation?: string }): Promise<void>;
  timeline(session: CallSession): Promise<TimelineEntry[]>;
  /** Waits until the ledger records the operation's result as delivered (spoken or sent), and returns it. */
  delivered(operationId: string, timeoutMs?: number): Promise<Operation>;
  close(): Promise<void>;
}

export interface InProcessGatewayOptions {
  readonly script: Record<string, unknown>;
  readonly speechSpeed?: number;
  /** RTP settings over the harness's (e.g. a short media timeout). */
  readonly rtp?: Partial<RtpConfig>;
  /** The realtime client's options for every call (e.g. a short session limit). */
  readonly session?: Pick<SessionOptions, 'sessionLimitMs' | 'expiryWarningMs'>;
  /** The simulator closes its sessions after this long (the provider's hard limit). */
  readonly maxSessionMs?: number;
  /** callgate's own lines (apology, goodbye); none by default. */
  readonly prompts?: Pick<CallPrompts, 'get'>;
  /** More actions of the test tenant beside its bookings (e.g. a shared read). */
  readonly actions?: Record<string, Record<string, unknown>>;
}

export async function startInProcessGateway(
  options: InProcessGatewayOptions,
): Promise<InProcessGateway> {
  // Bookings through a provider with room for the sandbox's latency faults (the harness default times out at 1 s).
  const agents = await startAgentsHarness({
    tenants: {
      demo: { book_table: { ...BOOK, provider: 'patient_bookings' }, ...options.actions },
    },
    providers: (url) => ({
      patient_bookings: { type: 'sandbox', service: 'bookings', baseUrl: url, timeoutMs: 10_000 },
    }),
    gatewayId: `gw-${Date.now()}`,
    workers: false,
  });
  const { h } = agents;
  // The operations run in a real worker process, as they do in production.
  const worker = startTs('jobs/worker-main.ts', {
    env: {
      CALLGATE_CONFIG: h.configPath,
      CALLGATE_HTTP_PORT: '0',
      CALLGATE__http__operator__port: '0',
      CALLGATE_LOG_LEVEL: 'info',
      REDIS_URL: h.config.redis.url ?? '',
    },
  });
  try {
    await waitFor(
      async () => (worker.stdout().includes('worker ready') ? true : undefined),
      30_000,
      'the worker process',
    );
  } catch (error) {
    worker.kill();
    await agents.close();
    throw new Error(`${(error as Error).message}\n${worker.output().slice(-2_000)}`);
  }
  const simulator = new RealtimeSimulator({
    script: parseSimulatorScript(stringify(options.script)),
    speechSpeed: options.speechSpeed ?? 2,
    ...(options.maxSessionMs !== undefined && { maxSessionMs: options.maxSessionMs }),
    logger: quietLog,
  });
  const url = await simulator.start();
  const tenants = h.config.tenants.map((t) => ({
    ...t,
    agent: 'reservations',
    transferTarget: 'sip:frontdesk@127.0.0.1:5080',
  }));
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, tcpPort: 0, transports: ['udp'] }),
    tenants,
    logger: quietLog,
  });
  const redis = testRedis();
  const registry = new CallRegistry({
    redis,
    prefix: h.prefix,
    gatewayId: agents.gatewayId,
    heartbeatMs: 500,
    deadAfterMs: 3_000,
    log: quietLog,
  });
  registry.start();
  const timer = new MonotonicMediaTimer();
  const rtpConfig: RtpConfig = { ...h.config.rtp, ...options.rtp };
  const ports = new RtpPortAllocator({ portMin: rtpConfig.portMin, portMax: rtpConfig.portMax });
  const events: InProcessGateway['events'] = [];
  const sessions: CallSession[] = [];
  const calls = new CallAcceptor({
    media: { config: rtpConfig, ports, scheduler: new PlayoutScheduler({ timer }), timer },
    model: {
      openSession: (session: SessionOptions = {}) =>
        new OpenAIRealtimeSession({ ...session, ...options.session, url, model: 'gpt-realtime' }),
    },
    catalogue: agents.catalogue,
    runtime: agents.runtime,
    delivery: agents.delivery,
    ledger: h.layer.ledger,
    registry,
    gatewayId: agents.gatewayId,
    log: quietLog,
    ...(options.prompts !== undefined && { prompts: options.prompts }),
    onEvent: (session, event) => {
      if (!sessions.includes(session)) sessions.push(session);
      events.push({ sessionId: session.sessionId, at: Date.now(), event });
    },
  });
  calls.listen(driver);
  await driver.start();
  const audit = new AuditLog(redis, h.prefix, quietLog);
  return {
    agents,
    simulator,
    calls,
    ports,
    registry,
    sipPort: driver.port('udp') ?? 0,
    sandboxUrl: h.sandbox.url,
    events,
    sessions,
    async addFault(rule) {
      const response = await fetch(`${h.sandbox.url}/admin/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(rule),
      });
      if (response.status !== 201)
        throw new Error(`sandbox refused the fault rule: ${await response.text()}`);
    },
    async timeline(session) {
      const record = await registry.get(session.sessionId);
      if (record === undefined) return [];
      return callTimeline({ registry, audit, ledger: h.layer.ledger }, record);
    },
    async delivered(operationId, timeoutMs = 15_000) {
      return waitFor(
        async () => {
          const op = await h.layer.ledger.get('demo', operationId);
          const sent =
            op?.delivery?.channel === 'out_of_band' &&
            Object.values(op.outOfBand ?? {}).some((record) => record.state === 'delivered');
          return op?.delivery?.delivered === true || sent ? op : undefined;
        },
        timeoutMs,
        'the result to be delivered',
      );
    },
    async close() {
      await calls.stop();
      await driver.stop();
      registry.stop();
      await simulator.stop();
      worker.child.kill('SIGTERM');
      const stopped = await Promise.race([
        worker.exited.then(() => true),
        new Promise<false>((resolve) => setTimeout(() => resolve(false), 10_000)),
      ]);
      if (!stopped) worker.kill();
      await agents.close();
      redis.disconnect();
    },
  };
}
