/**
 * The worker and gateway processes of a chaos run, in slots: each slot always holds one process
 * (started, running, paused or being replaced). A process's output goes to a log file in the run's
 * directory. Every process is tracked by PID and stopped by PID at the end, paused ones resumed
 * first. A process can start under libfaketime with its clock offset (a clock-offset fault).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** libfaketime as the Debian package `faketime` installs it. */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
/** A tsx process on a loaded two-core machine can take this long to be ready. */
const READY_TIMEOUT_MS = 60_000;
/** How long SIGTERM may take before SIGKILL follows (a gateway drains its calls first). */
const STOP_GRACE_MS = 15_000;

export type ProcessRole = 'worker' | 'gateway';

export interface ChaosProcess {
  readonly role: ProcessRole;
  readonly name: string;
  readonly child: ChildProcess;
  readonly logPath: string;
  readonly clockOffsetMs: number;
  readonly exited: Promise<void>;
  ready: boolean;
  paused: boolean;
}

export interface ProcessPoolOptions {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
}

export class ProcessPool {
  private readonly all: ChaosProcess[] = [];
  private generation = 0;
  /** Processes that exited without being told to (a finding, and replaced). */
  readonly unexpectedExits: string[] = [];

  constructor(private readonly options: ProcessPoolOptions) {}

  start(role: ProcessRole, slot: number, clockOffsetMs = 0): ChaosProcess {
    this.generation++;
    // A restarted gateway gets a new id, as a replaced pod gets a new name.
    const name =
      role === 'gateway' ? `gw-${slot}-${this.generation}` : `worker-${slot}-${this.generation}`;
    const logPath = join(this.options.dir, `${name}.log`);
    const log = openSync(logPath, 'a');
    const entry = role === 'gateway' ? 'bench/chaos/chaos-gateway.ts' : 'jobs/worker-main.ts';
    const clock =
      clockOffsetMs === 0
        ? {}
        : {
            LD_PRELOAD: LIBFAKETIME,
            FAKETIME: `${clockOffsetMs > 0 ? '+' : ''}${(clockOffsetMs / 1000).toFixed(1)}s`,
            FAKETIME_DONT_FAKE_MONOTONIC: '1',
          };
    const child = spawn(process.execPath, ['--import', 'tsx', entry], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        ...this.options.env,
        ...clock,
        CALLGATE_GATEWAY_ID: name,
        CALLGATE_HTTP_PORT: '0',
        CALLGATE__http__operator__port: '0',
      },
      stdio: ['ignore', log, log, 'ipc'],
    });
    closeSync(log);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const proc: ChaosProcess = {
      role,
      name,
      child,
      logPath,
      clockOffsetMs,
      exited,
      ready: false,
      paused: false,
    };
    child.on('message', (message: { type?: string }) => {
      if (message.type === 'ready') proc.ready = true;
    });
    child.on('error', () => undefined);
    this.all.push(proc);
    return proc;
  }

  /** Resolves when the process says it is ready (a gateway over IPC, a worker in its log). */
  async waitReady(proc: ChaosProcess): Promise<boolean> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline && isRunning(proc)) {
      if (
        proc.role === 'worker' &&
        !proc.ready &&
        existsSync(proc.logPath) &&
        readFileSync(proc.logPath, 'utf8').includes('worker ready')
      )
        proc.ready = true;
      if (proc.ready) return true;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return false;
  }

  kill(proc: ChaosProcess): Promise<void> {
    if (isRunning(proc)) proc.child.kill('SIGKILL');
    return proc.exited;
  }

  pause(proc: ChaosProcess): void {
    if (!isRunning(proc)) return;
    proc.child.kill('SIGSTOP');
    proc.paused = true;
  }

  resume(proc: ChaosProcess): void {
    if (!proc.paused) return;
    proc.paused = false;
    if (isRunning(proc)) proc.child.kill('SIGCONT');
  }

  /** SIGTERM (a clean stop: calls end, results go out of band), SIGKILL after the grace. */
  async stop(proc: ChaosProcess): Promise<void> {
    this.resume(proc);
    if (!isRunning(proc)) return;
    proc.child.kill('SIGTERM');
    const timer = setTimeout(() => proc.child.kill('SIGKILL'), STOP_GRACE_MS);
    await proc.exited;
    clearTimeout(timer);
  }

  /** Every process still running, stopped by PID (paused ones resumed first). */
  async stopAll(): Promise<void> {
    await Promise.all(this.all.map((proc) => this.stop(proc)));
  }

  /** On an abrupt end of the run (an error, SIGINT): SIGKILL by PID, no waiting. */
  killAllNow(): void {
    for (const proc of this.all) {
      if (!isRunning(proc)) continue;
      proc.child.kill('SIGKILL');
    }
  }

  processes(): readonly ChaosProcess[] {
    return this.all;
  }
}

export function isRunning(proc: ChaosProcess): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}
