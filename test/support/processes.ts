/** Child processes for tests: started with the project's TypeScript loader, always reaped. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface StartedProcess {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Sends SIGKILL if still running; for cleanup. */
  kill(): void;
}

/** Every child still running; killed when the test process exits, whatever a test forgot to stop. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Runs a TypeScript entry point of the project in a new Node process. */
/** `prefix`: a command that execs node in its own process (setpriv, nice), so the PID is node's. */
export function startTs(
  entry: string,
  options: { args?: readonly string[]; env?: NodeJS.ProcessEnv; prefix?: readonly string[] } = {},
): StartedProcess {
  const command = [
    ...(options.prefix ?? []),
    process.execPath,
    '--import',
    'tsx',
    entry,
    ...(options.args ?? []),
  ];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1));
  });
  return {
    child,
    output: () => out + err,
    stdout: () => out,
    stderr: () => err,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** Polls `probe` until it returns a value, or fails after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError instanceof Error ? `: ${lastError.message}` : ''}`,
  );
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
