/**
 * The callgate the demo calls: one already running (its SIP address, probe and operator URLs and,
 * optionally, its sandbox), or a fresh one started as `npm start` starts it (gateway/main.ts in a child process on
 * free loopback ports, a private redis-server of its own, the local simulator with the bundled demo
 * script) and stopped by its PID when the demo is over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** A fresh callgate is up well within this (tsx, redis-server, workers, simulator). */
export const START_TIMEOUT_MS = 30_000;
/** SIGTERM drains and stops the private Redis; past this the process is killed. */
const STOP_TIMEOUT_MS = 10_000;

export interface DemoTarget {
  readonly sipHost: string;
  readonly sipPort: number;
  /** Probes and metrics. */
  readonly httpUrl: string;
  /** The operator API (calls, operations, timelines). */
  readonly operatorUrl: string;
  /** The bearer token for the operator API; none for an open one (loopback without tokens). */
  readonly operatorToken?: string;
  /** The sandbox systems of record (faults, side effects, out-of-band messages), when known. */
  readonly sandboxUrl?: string;
  /** True when the demo started this callgate (and will stop it). */
  readonly started: boolean;
  /** The process of a started callgate. */
  readonly pid?: number;
  /** The callgate's own log so far (a started one only), for a failure report. */
  output(): string;
  stop(): Promise<void>;
}

export interface FreshCallgateOptions {
  /** Settings for the demo's callgate only, as CALLGATE__section__key overrides. */
  readonly overrides?: Readonly<Record<string, string>>;
  /** A configuration file of its own; the embedded default otherwise. */
  readonly configPath?: string;
  /** Options for node itself (e.g. --cpu-prof, which NODE_OPTIONS does not take). */
  readonly nodeArgs?: readonly string[];
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        address !== null && typeof address === 'object'
          ? resolve(address.port)
          : reject(new Error('no free port')),
      );
    });
  });
}

/** The entry point next to this file: TypeScript in development (through tsx), JavaScript in the image. */
function mainEntry(): { args: string[]; cwd: string } {
  const self = fileURLToPath(import.meta.url);
  // The project root, where tsx and the embedded configuration are found.
  const cwd = fileURLToPath(new URL('../../', import.meta.url));
  if (self.endsWith('.ts'))
    return {
      args: ['--import', 'tsx', fileURLToPath(new URL('../main.ts', import.meta.url))],
      cwd,
    };
  return { args: [fileURLToPath(new URL('../main.js', import.meta.url))], cwd };
}

export async function startFreshCallgate(options: FreshCallgateOptions = {}): Promise<DemoTarget> {
  const [sipPort, httpPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CALLGATE_HTTP_PORT: String(httpPort),
    // Learnt from its "operator api listening" line below.
    CALLGATE__http__operator__port: '0',
    CALLGATE_SIP_PORT: String(sipPort),
    CALLGATE_SIP_TCP_PORT: String(sipPort),
    // The demo follows the bundled simulator script; a real model would not press on cue.
    CALLGATE__model__provider: 'simulator',
    CALLGATE_LOG_LEVEL: 'info',
    ...options.overrides,
  };
  // A private Redis, as `npm start` starts one: the demo never writes into someone else's.
  delete env.REDIS_URL;
  if (options.configPath === undefined) delete env.CALLGATE_CONFIG;
  else env.CALLGATE_CONFIG = options.configPath;
  const { args, cwd } = mainEntry();
  const child: ChildProcess = spawn(process.execPath, [...(options.nodeArgs ?? []), ...args], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!out.includes('callgate ready')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(
        `callgate did not start${child.exitCode !== null ? ` (exit code ${child.exitCode})` : ` within ${START_TIMEOUT_MS} ms`}:\n${out.slice(-2_000)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const sandboxLine = out
    .split('\n')
    .find((line) => line.includes('sandbox systems of record listening'));
  const sandboxUrl =
    sandboxLine === undefined
      ? undefined
      : ((JSON.parse(sandboxLine) as { url?: string }).url ?? undefined);
  const operatorLine = out.split('\n').find((line) => line.includes('operator api listening'));
  const operatorAddress =
    operatorLine === undefined
      ? undefined
      : (JSON.parse(operatorLine) as { address?: string }).address;
  if (operatorAddress === undefined) {
    await stop();
    throw new Error(`callgate did not say where its operator API listens:\n${out.slice(-2_000)}`);
  }
  return {
    sipHost: '127.0.0.1',
    sipPort,
    httpUrl,
    operatorUrl: `http://${operatorAddress}`,
    ...(sandboxUrl !== undefined && { sandboxUrl }),
    started: true,
    ...(child.pid !== undefined && { pid: child.pid }),
    output: () => out,
    stop,
  };
}

/** A callgate someone else runs: checked for readiness, never stopped by the demo. */
export async function attachCallgate(target: {
  sipHost: string;
  sipPort: number;
  httpUrl: string;
  operatorUrl: string;
  operatorToken?: string;
  sandboxUrl?: string;
}): Promise<DemoTarget> {
  const ready = await fetch(`${target.httpUrl}/readyz`).catch((error: unknown) => {
    throw new Error(
      `no callgate answers at ${target.httpUrl} (${error instanceof Error ? error.message : String(error)}); start one with npm start, or run the demo without --attach`,
    );
  });
  if (ready.status !== 200)
    throw new Error(
      `the callgate at ${target.httpUrl} is not ready (${ready.status}): ${await ready.text()}`,
    );
  return { ...target, started: false, output: () => '', stop: async () => undefined };
}
