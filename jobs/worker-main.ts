/**
 * The worker role: executes operations against systems of record. Run alone with
 * `npm run start:worker` (production: its own Deployment), or inside `npm start` next to the gateway.
 */
import { pathToFileURL } from 'node:url';
import { ActionLayer } from './action-layer.ts';
import { registerOperationsApi } from './http/operations-api.ts';
import { startProcess, type ProcessContext } from './process-runtime.ts';
import { createProviders } from './providers/registry.ts';
import { startSandbox } from './providers/sandbox/sandbox-server.ts';

/**
 * A gateway never calls providers (workers do); it reads their declarations. Sandbox providers need
 * a URL to be built, and in a gateway-only process this one is never contacted.
 */
const DECLARATION_ONLY_URL = 'http://127.0.0.1:9';

export interface ActionLayerStartOptions {
  /** Execute operations here (worker role); otherwise only admit, cancel and look up (gateway role). */
  readonly runWorkers: boolean;
}

/** Starts the durable action layer inside a started process and registers its admin API. */
export async function startActionLayer(
  context: ProcessContext,
  options: ActionLayerStartOptions,
): Promise<ActionLayer> {
  const { config, log, http, operator } = context;
  let sandboxUrl = DECLARATION_ONLY_URL;
  if (options.runWorkers && config.sandbox.enabled) {
    const sandbox = await startSandbox({ host: config.sandbox.listen, port: config.sandbox.port });
    context.onShutdown('sandbox', () => sandbox.close());
    sandboxUrl = sandbox.url;
    log.info('sandbox systems of record listening', { url: sandbox.url });
  } else if (options.runWorkers && config.sandbox.url !== undefined) {
    sandboxUrl = config.sandbox.url.replace(/\/+$/, '');
  }
  const providers = createProviders(config, { sandboxUrl });
  const layer = await ActionLayer.open({
    config,
    redisUrl: context.redis.url,
    log,
    providers,
    sandboxUrl: sandboxUrl === DECLARATION_ONLY_URL ? undefined : sandboxUrl,
  });
  context.onShutdown('action layer', () => layer.close());
  if (options.runWorkers) await layer.startWorkers();
  registerOperationsApi(operator, {
    ledger: layer.ledger,
    queues: layer.queues,
    outOfBand: layer.outOfBand,
    tenants: config.tenants.map((t) => t.id),
  });
  http.addMetricsRefresher(() => layer.refreshMetrics());
  return layer;
}

async function main(): Promise<void> {
  const context = await startProcess('worker');
  await startActionLayer(context, { runWorkers: true });
  await context.markStarted();
  context.log.info('worker ready', { tenants: context.config.tenants.length });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
}
