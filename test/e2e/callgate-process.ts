/**
 * callgate as the product runs it (gateway/main.ts in a child process: SIP, RTP, the simulator,
 * workers, the embedded sandbox) on free loopback ports, the run's Redis under a unique prefix,
 * and a simulator script of the test's own. Reaped by PID.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';
import { REPO_ROOT, startTs, waitFor, type StartedProcess } from '../support/processes.ts';
import {
  bearer,
  TEST_OPERATOR_TOKEN,
  TEST_OPERATOR_TOKEN_CONFIG,
  TEST_OPERATOR_TOKEN_ENV,
} from '../support/operator-api.ts';
import { freeSipPort } from '../support/ports.ts';
import { deletePrefix, testRedis, testRedisUrl, uniquePrefix } from '../support/redis.ts';

export interface CallgateProcess {
  readonly proc: StartedProcess;
  readonly sipPort: number;
  /** Probes and metrics. */
  readonly httpUrl: string;
  /** The operator API (learnt from the startup log); `get` and `operatorFetch` send the test token. */
  readonly operatorUrl: string;
  readonly sandboxUrl: string;
  readonly prefix: string;
  readonly shared: SharedSetup;
  get<T>(path: string): Promise<T>;
  /** A request to a path of the operator API with the test token (headers given here are added). */
  operatorFetch(path: string, init?: RequestInit): Promise<Response>;
  /** The first call the session registry lists as active. */
  activeCall(timeoutMs?: number): Promise<CallView>;
  operations(sessionId: string): Promise<OperationView[]>;
  /** Waits until the call's operation picked by `which` has its result delivered (spoken or sent), and returns it. */
  delivered(
    sessionId: string,
    which: (op: OperationView) => boolean,
    timeoutMs?: number,
  ): Promise<OperationView>;
  timeline(sessionId: string): Promise<TimelineEntryView[]>;
  /** Adds a sandbox fault rule (e.g. `latency=3000` for bookings/book). */
  addFault(rule: {
    fault: string;
    service?: string;
    operation?: string;
    nth?: number;
    times?: number;
  }): Promise<void>;
  /** SIGTERM (SIGKILL after 8 s); deletes the Redis prefix unless the setup is shared with another process. */
  stop(keepData?: boolean): Promise<void>;
}

export interface CallView {
  readonly session_id: string;
  readonly state: string;
  readonly end_reason?: string;
  readonly caller: string;
}

export interface OperationView {
  readonly operation_id: string;
  readonly action: string;
  readonly state: string;
  readonly session_id: string;
  readonly delivery?: {
    readonly decision: string;
    readonly reasons: string[];
    readonly delivered: boolean;
    readonly channel: string;
    readonly queued?: boolean;
  };
  /** Each out-of-band channel's state (written by the worker when the receiver took it). */
  readonly out_of_band?: Readonly<
    Record<string, { readonly state: string; readonly attempts: number }>
  >;
}

/** Told: spoken to the end, or out of band with a channel's receiver having taken the message. */
export function isDelivered(op: OperationView): boolean {
  return (
    op.delivery?.delivered === true ||
    (op.delivery?.channel === 'out_of_band' &&
      Object.values(op.out_of_band ?? {}).some((record) => record.state === 'delivered'))
  );
}

export interface TimelineEntryView {
  readonly at: number;
  readonly source: 'call' | 'audit' | 'operation';
  readonly type: string;
  readonly detail: Record<string, unknown>;
}

export interface CallgateProcessOptions {
  /** The simulator script (YAML-able object). */
  readonly script: Record<string, unknown>;
  /** The demo tenant's first agent. */
  readonly agent?: string;
  /** `gateway` runs no workers and no sandbox (a worker process does: see `worker`). */
  readonly role?: 'all' | 'gateway';
  readonly gatewayId?: string;
  /** Join another process's configuration and Redis prefix instead of making new ones. */
  readonly shared?: SharedSetup;
  /** Run jobs/worker-main.ts (workers, the sandbox, out-of-band sending) instead of the gateway. */
  readonly worker?: boolean;
  /** Changes to the configuration document after the test's own (e.g. shorter worker timings). */
  readonly overrides?: (config: Record<string, unknown>) => void;
  /** A command that execs the process (e.g. setpriv with fewer capabilities). */
  readonly commandPrefix?: readonly string[];
  /** More environment for the process (e.g. the secrets of extra operator tokens). */
  readonly env?: NodeJS.ProcessEnv;
}

export interface SharedSetup {
  readonly configPath: string;
  readonly prefix: string;
}

/** Writes a configuration (the documented example, with the test's script and agent) and picks a Redis prefix. */
export function writeCallgateConfig(
  options: Pick<CallgateProcessOptions, 'script' | 'agent' | 'overrides'>,
): SharedSetup {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-e2e-'));
  const scriptPath = join(dir, 'script.yaml');
  writeFileSync(scriptPath, stringify(options.script));
  const config = parse(readFileSync(join(REPO_ROOT, 'config/callgate.example.yaml'), 'utf8')) as {
    model: { simulator?: { script?: string } };
    tenants: { agent: string }[];
    gateway?: Record<string, unknown>;
  };
  config.model.simulator = { script: scriptPath };
  for (const tenant of config.tenants) tenant.agent = options.agent ?? tenant.agent;
  config.gateway = { heartbeatMs: 500, deadAfterMs: 3_000, drainMs: 3_000 };
  (config as { http?: Record<string, unknown> }).http = {
    ...(config as { http?: Record<string, unknown> }).http,
    operator: { tokens: [TEST_OPERATOR_TOKEN_CONFIG] },
  };
  options.overrides?.(config);
  const configPath = join(dir, 'callgate.yaml');
  writeFileSync(configPath, stringify(config));
  return { configPath, prefix: uniquePrefix('e2e') };
}

/** Ports picked free can be taken by another test before the process binds them: start again on new ones. */
const START_ATTEMPTS = 3;

export async function startCallgate(options: CallgateProcessOptions): Promise<CallgateProcess> {
  const setup = options.shared ?? writeCallgateConfig(options);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options, setup);
    } catch (error) {
      if (
        attempt >= START_ATTEMPTS ||
        !(error instanceof Error) ||
        !error.message.includes('EADDRINUSE')
      )
        throw error;
    }
  }
}

async function startOnce(
  options: CallgateProcessOptions,
  { configPath, prefix }: SharedSetup,
): Promise<CallgateProcess> {
  // SIP listens on UDP and TCP: the port must be free for both.
  const sipPort = await freeSipPort();
  const httpPort = await freeLoopbackPort();
  const entry = options.worker === true ? 'jobs/worker-main.ts' : 'gateway/main.ts';
  const proc = startTs(entry, {
    ...(options.commandPrefix !== undefined && { prefix: options.commandPrefix }),
    args: options.role === undefined || options.worker === true ? [] : ['--role', options.role],
    env: {
      CALLGATE_CONFIG: configPath,
      CALLGATE_HTTP_PORT: String(httpPort),
      CALLGATE__http__operator__port: '0',
      [TEST_OPERATOR_TOKEN_ENV]: TEST_OPERATOR_TOKEN,
      CALLGATE_SIP_PORT: String(sipPort),
      CALLGATE_SIP_TCP_PORT: String(sipPort),
      REDIS_URL: testRedisUrl(),
      CALLGATE__redis__prefix: prefix,
      OPENAI_API_KEY: '',
      ...(options.gatewayId !== undefined && { CALLGATE_GATEWAY_ID: options.gatewayId }),
      ...options.env,
    },
  });
  const readyLine = options.worker === true ? 'worker ready' : 'callgate ready';
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  try {
    // A process that exits (a port taken meanwhile) fails at once instead of after the wait.
    const exited = proc.exited.then((code) => {
      throw new Error(`exited with ${String(code)} before ${readyLine}`);
    });
    exited.catch(() => undefined);
    await Promise.race([
      waitFor(
        async () =>
          (await fetch(`${httpUrl}/readyz`)).status === 200 && proc.stdout().includes(readyLine)
            ? true
            : undefined,
        30_000,
        readyLine,
      ),
      exited,
    ]);
  } catch (error) {
    proc.kill();
    throw new Error(`${(error as Error).message}\n${proc.output().slice(-3000)}`);
  }
  const sandboxLine = proc
    .stdout()
    .split('\n')
    .find((line) => line.includes('sandbox systems of record listening'));
  const sandboxUrl = (JSON.parse(sandboxLine ?? '{}') as { url?: string }).url ?? '';
  const operatorUrl = operatorUrlFrom(proc.stdout());
  const operatorFetch = (path: string, init: RequestInit = {}) =>
    fetch(`${operatorUrl}${path}`, { ...init, headers: { ...bearer(), ...init.headers } });
  const get = async <T>(path: string): Promise<T> => {
    // A full URL is another service's (the sandbox's): the token is not sent there.
    const response = await (path.startsWith('http') ? fetch(path) : operatorFetch(path));
    return (await response.json()) as T;
  };
  return {
    proc,
    sipPort,
    httpUrl,
    operatorUrl,
    sandboxUrl,
    prefix,
    shared: { configPath, prefix },
    get,
    operatorFetch,
    async activeCall(timeoutMs = 5_000) {
      return waitFor(
        async () => (await get<{ active: CallView[] }>('/v1/calls')).active[0],
        timeoutMs,
        'a call in the session registry',
      );
    },
    async operations(sessionId) {
      return (await get<{ operations: OperationView[] }>(`/v1/operations?session_id=${sessionId}`))
        .operations;
    },
    async delivered(sessionId, which, timeoutMs = 15_000) {
      return waitFor(
        async () => {
          const op = (
            await get<{ operations: OperationView[] }>(`/v1/operations?session_id=${sessionId}`)
          ).operations.find(which);
          return op !== undefined && isDelivered(op) ? op : undefined;
        },
        timeoutMs,
        'the result to be delivered',
      );
    },
    async timeline(sessionId) {
      return (await get<{ timeline: TimelineEntryView[] }>(`/v1/calls/${sessionId}/timeline`))
        .timeline;
    },
    async addFault(rule) {
      const response = await fetch(`${sandboxUrl}/admin/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(rule),
      });
      if (response.status !== 201)
        throw new Error(`sandbox refused the fault rule: ${await response.text()}`);
    },
    async stop(keepData = options.shared !== undefined) {
      proc.child.kill('SIGTERM');
      const exited = await Promise.race([
        proc.exited,
        new Promise((resolve) => setTimeout(() => resolve('timeout'), 8_000)),
      ]);
      if (exited === 'timeout') proc.kill();
      if (keepData) return;
      const redis = testRedis();
      await deletePrefix(redis, prefix);
      await deletePrefix(redis, `{${prefix}-bull}`);
      redis.disconnect();
    },
  };
}

/** The operator API's address, from its "operator api listening" line (it listens on port 0). */
export function operatorUrlFrom(stdout: string): string {
  const line = stdout.split('\n').find((text) => text.includes('operator api listening'));
  const address = (JSON.parse(line ?? '{}') as { address?: string }).address;
  if (address === undefined) throw new Error('no "operator api listening" line in the output');
  return `http://${address}`;
}
