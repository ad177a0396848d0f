/**
 * What every callgate process does around its real work: load the configuration (a bad one stops
 * startup with exit code 2 and every problem by path), set up logging and secret scrubbing, find
 * or start Redis, serve probes and metrics, open the operator API once the role is up, and shut
 * down in order on SIGTERM/SIGINT within the drain limit.
 */
import { hostname } from 'node:os';
import { isCallgateError } from '../config/errors.ts';
import { ConfigError, loadConfig, type LoadOptions } from '../config/load.ts';
import { Logger, registerSecret, setRootLogger } from '../config/log.ts';
import { collectProcessMetrics, gauge } from '../config/metrics.ts';
import type { Config } from '../config/schema.ts';
import { OperatorServer } from './http/operator-server.ts';
import { readOperatorTokens, type OperatorTokens } from './http/operator-tokens.ts';
import { HttpServer } from './http/server.ts';
import { checkRedis, safeRedisUrl } from './redis/connection.ts';
import { resolveRedis, type RedisEndpoint } from './redis/local-redis.ts';

export const EXIT_CONFIG = 2;
export const EXIT_STARTUP = 1;

export interface ProcessContext {
  readonly config: Config;
  readonly log: Logger;
  readonly redis: RedisEndpoint;
  /** Probes and metrics (`http.port`): readiness checks and metrics refreshers go here. */
  readonly http: HttpServer;
  /** The operator API (`http.operator.port`): routes go here, before markStarted. */
  readonly operator: OperatorServer;
  readonly gatewayId: string;
  /** Registers something to stop at shutdown; stopped in reverse order of registration. */
  onShutdown(name: string, stop: () => Promise<void>): void;
  /** Aborted when shutdown begins: components stop taking new work. */
  readonly draining: AbortSignal;
  /**
   * The role is up: the operator API starts listening (its routes are all registered by now) and
   * readiness stops reporting "starting". A port that cannot be bound stops the process (exit 1).
   */
  readonly markStarted: () => Promise<void>;
}

/** Loads the configuration, or prints every problem and exits 2 (no stack trace). */
export function loadConfigOrExit(options: LoadOptions = {}): Config {
  try {
    return loadConfig(options);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`callgate: ${error.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw error;
  }
}

export interface StartProcessOptions {
  /**
   * Runs once the configuration is loaded, before Redis, HTTP or signal handling start: what else
   * the role reads to be configured (a gateway's agent module). A ConfigError it throws stops the
   * process as a bad configuration file does: every problem printed, exit 2.
   */
  readonly prepare?: (config: Config, log: Logger) => Promise<void>;
}

async function prepareOrExit(
  config: Config,
  log: Logger,
  prepare: StartProcessOptions['prepare'],
): Promise<void> {
  try {
    await prepare?.(config, log);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`callgate: ${error.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw error;
  }
}

/** The operator tokens from their environment variables, or every problem printed and exit 2. */
function readOperatorTokensOrExit(config: Config): OperatorTokens {
  try {
    return readOperatorTokens(config, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`callgate: ${error.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw error;
  }
}

/** Reads secrets named by the configuration so the logger can scrub them everywhere. */
function registerConfiguredSecrets(config: Config): void {
  for (const token of config.http.operator.tokens) registerSecret(process.env[token.tokenEnv]);
  registerSecret(process.env[config.model.openai.apiKeyEnv]);
  registerSecret(process.env[config.sip.drachtio.secretEnv]);
  for (const tenant of config.tenants) {
    if (tenant.trunk.digest) registerSecret(process.env[tenant.trunk.digest.passwordEnv]);
    if (tenant.notify.webhookSecretEnv) registerSecret(process.env[tenant.notify.webhookSecretEnv]);
    if (typeof tenant.notify.sms === 'object')
      registerSecret(process.env[tenant.notify.sms.tokenEnv]);
  }
  for (const provider of Object.values(config.providers)) {
    if (provider.type === 'http' && provider.tokenEnv)
      registerSecret(process.env[provider.tokenEnv]);
  }
  const redisUrl = config.redis.url;
  if (redisUrl !== undefined) {
    try {
      registerSecret(decodeURIComponent(new URL(redisUrl).password));
    } catch {
      // an unparseable URL fails at connect time with its own message
    }
  }
}

/**
 * Starts the shared parts of a process. Failures here (Redis unreachable, port taken) print one
 * clear line and exit non-zero instead of hanging or dumping a stack.
 */
export async function startProcess(
  role: string,
  options: StartProcessOptions = {},
): Promise<ProcessContext> {
  // A worker never opens TLS: the files only a gateway reads are not its to check.
  const config = loadConfigOrExit({ tlsFiles: role !== 'worker' });
  registerConfiguredSecrets(config);
  const tokens = readOperatorTokensOrExit(config);
  const gatewayId =
    config.gateway.id ??
    `${hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')}-${process.pid}`;
  const log = new Logger({
    level: config.log.level,
    fields: { role, gateway_id: gatewayId },
    maskCallerNumbers: config.privacy.maskCallerNumbers,
  });
  setRootLogger(log);
  await prepareOrExit(config, log, options.prepare);
  collectProcessMetrics();

  const stops: { name: string; stop: () => Promise<void> }[] = [];
  const drain = new AbortController();
  const onShutdown = (name: string, stop: () => Promise<void>) => {
    stops.push({ name, stop });
  };

  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) {
      log.warn('second signal: exiting at once', { signal });
      process.exit(EXIT_STARTUP);
    }
    shuttingDown = true;
    log.info('shutting down', { signal, drain_ms: config.gateway.drainMs });
    drain.abort();
    // The drain limit bounds the whole shutdown; a component that hangs does not keep us alive.
    const deadline = setTimeout(() => {
      log.error('drain limit reached, exiting', { drain_ms: config.gateway.drainMs });
      process.exit(EXIT_STARTUP);
    }, config.gateway.drainMs + 2_000);
    // Kept referenced: a stop that awaits a handle already closed must end here, not as an exit 13.
    for (const { name, stop } of stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        log.warn('stop failed', { component: name, error });
      }
    }
    clearTimeout(deadline);
    log.info('stopped');
    // A start refused for its configuration has set its exit code (2) before shutting down.
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  try {
    const redis = await resolveRedis(config.redis.url);
    const local = redis.local;
    if (local) {
      onShutdown('redis-server', () => local.stop());
      log.info('started a private redis-server', { url: redis.url, pid: local.pid });
    }
    await checkRedis(redis.url);
    const http = new HttpServer();
    http.addReadinessCheck({
      name: 'redis',
      check: async () => {
        try {
          await checkRedis(redis.url, 1_000);
          return undefined;
        } catch (error) {
          return error instanceof Error ? error.message : String(error);
        }
      },
    });
    http.addReadinessCheck({
      name: 'http',
      check: async () => (drain.signal.aborted ? 'draining' : undefined),
    });
    // Not ready until the role's components are up: a probe must not see a half-started process.
    let started = false;
    http.addReadinessCheck({
      name: 'startup',
      check: async () => (started ? undefined : 'starting'),
    });
    const operator = new OperatorServer({
      tokens: tokens.size === 0 ? 'open' : tokens,
      log,
    });
    const markStarted = async () => {
      try {
        const at = await operator.listen(config.http.operator.port, config.http.operator.listen);
        onShutdown('operator http', () => operator.close());
        log.info('operator api listening', {
          address: `${at.address}:${at.port}`,
          // Not "tokens": the logger scrubs fields so named as secrets.
          auth: operator.open
            ? 'open'
            : `bearer (${config.http.operator.tokens.map((token) => token.name).join(', ')})`,
        });
        // Allowed on loopback only (the schema refuses it elsewhere); said at every start.
        if (operator.open)
          log.warn('operator api is open: no tokens configured, anyone on this host can use it', {
            address: `${at.address}:${at.port}`,
          });
      } catch (error) {
        const message = isCallgateError(error) ? `${error.code}: ${error.message}` : String(error);
        process.stderr.write(`callgate: ${message}\n`);
        process.exitCode = EXIT_STARTUP;
        void shutdown('startup failed');
        await new Promise(() => undefined);
      }
      started = true;
    };
    const address = await http.listen(config.http.port, config.http.listen);
    onShutdown('http', () => http.close());
    gauge({
      name: 'callgate_build_info',
      help: 'Build information; always 1.',
      labelNames: ['version', 'role'],
    })
      .labels(process.env.npm_package_version ?? '0.0.0', role)
      .set(1);
    log.info('http listening', {
      address: `${address.address}:${address.port}`,
      redis: safeRedisUrl(redis.url),
    });
    return {
      config,
      log,
      redis,
      http,
      operator,
      gatewayId,
      onShutdown,
      markStarted,
      draining: drain.signal,
    };
  } catch (error) {
    const message = isCallgateError(error)
      ? `${error.code}: ${error.message}`
      : error instanceof Error
        ? error.message
        : String(error);
    process.stderr.write(`callgate: ${message}\n`);
    for (const { stop } of stops.reverse()) await stop().catch(() => undefined);
    process.exit(EXIT_STARTUP);
  }
}
