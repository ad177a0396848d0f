/**
 * The gateway side of one gateway in a process of its own, for tests that pause it (SIGSTOP):
 * result delivery and a heartbeating janitor on the configuration at CALLGATE_CONFIG, and two
 * calls. On `<GATEWAY_ID>-speak` the caller is silent, so results are spoken at once; on
 * `<GATEWAY_ID>-hold` the caller talks until SIGUSR1, which makes it fall silent (results held
 * meanwhile are then told). Each response lasts SPEECH_MS. Prints one JSON line per event:
 * {"event":"ready"}, {"event":"asked","session":…,"operation":…}, {"event":"spoken",…,"status":…}, each with
 * `at` (ms, the host's clock).
 */
import { Redis } from 'ioredis';
import { AgentSession } from '../../../agents/agent-session.ts';
import { AuditLog } from '../../../agents/audit.ts';
import { Janitor } from '../../../agents/janitor.ts';
import {
  ResultDelivery,
  type ConversationPort,
  type SpokenOutcome,
} from '../../../agents/result-delivery.ts';
import { loadConfig } from '../../../config/load.ts';
import { Logger } from '../../../config/log.ts';
import { ActionLayer } from '../../../jobs/action-layer.ts';
import { createProviders } from '../../../jobs/providers/registry.ts';
import { exampleCatalogue } from '../../support/example-agents.ts';

const gatewayId = process.env.GATEWAY_ID ?? 'gw-paused';
const speechMs = Number(process.env.SPEECH_MS ?? '1000');
const config = loadConfig();
const redisUrl = config.redis.url ?? '';
const log = new Logger({
  level: 'error',
  sink: { write: (line: string) => process.stderr.write(`${line}\n`) },
});
const say = (event: Record<string, unknown>): void =>
  void process.stdout.write(`${JSON.stringify({ ...event, at: Date.now() })}\n`);

const layer = await ActionLayer.open({ config, redisUrl, log, providers: createProviders(config) });
const shared = new Redis(redisUrl, { maxRetriesPerRequest: null });
const blocking = new Redis(redisUrl, { maxRetriesPerRequest: null });
const tenants = config.tenants.map((t) => t.id);
// The harness's configuration carries the test's actions only: calls are answered by the example's agents.
const catalogue = exampleCatalogue();
const delivery = new ResultDelivery({
  redis: blocking,
  commands: shared,
  ledger: layer.ledger,
  gatewayId,
  tenants,
  catalogue,
  outOfBand: layer.outOfBand,
  audit: new AuditLog(shared, config.redis.prefix, log),
  log,
  pauseSuspectMs: config.gateway.deadAfterMs - config.gateway.heartbeatMs,
});

class PrintingPort implements ConversationPort {
  constructor(private readonly sessionId: string) {}

  async deliver(result: { operationId: string }, stop?: AbortSignal): Promise<SpokenOutcome> {
    say({ event: 'asked', session: this.sessionId, operation: result.operationId });
    const cut = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), speechMs);
      stop?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        { once: true },
      );
    });
    const status = cut ? 'cancelled' : 'completed';
    say({ event: 'spoken', session: this.sessionId, operation: result.operationId, status });
    return { status, responseId: `resp_${result.operationId}`, firstAudioAt: Date.now() };
  }
}

const tenantId = tenants[0] ?? '';
const speaking = new AgentSession({
  sessionId: `${gatewayId}-speak`,
  tenantId,
  caller: '+15550142',
  ownerGateway: gatewayId,
  agent: 'reservations',
});
const holding = new AgentSession({
  sessionId: `${gatewayId}-hold`,
  tenantId,
  caller: '+15550143',
  ownerGateway: gatewayId,
  agent: 'reservations',
});
holding.callerSpeaking = true;
delivery.attach(speaking, new PrintingPort(speaking.sessionId));
delivery.attach(holding, new PrintingPort(holding.sessionId));
process.on('SIGUSR1', () => {
  holding.callerSpeaking = false;
  delivery
    .onIdle(holding.sessionId)
    .catch((error: unknown) => log.error('idle handling failed', { error }));
});

await delivery.start();
const janitor = new Janitor({
  redis: shared,
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
say({ event: 'ready' });
