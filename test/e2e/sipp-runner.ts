/**
 * Runs sipp (Debian package sip-tester) as a child process against the built-in stack on loopback,
 * bounded by -m and -timeout and killed by its own PID if it overstays. Returns the exit code,
 * the message trace (what went on the wire) and the statistics sipp printed.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freeSipPort } from '../support/ports.ts';

export const SIPP_FIXTURES = resolve(import.meta.dirname, '../fixtures/sipp');

export interface SippRun {
  readonly scenario: string;
  readonly port: number;
  readonly transport: 'udp' | 'tcp';
  readonly service: string;
  readonly calls?: number;
  readonly rate?: number;
  readonly limit?: number;
  /** Default pause (`<pause/>`) in milliseconds. */
  readonly pauseMs?: number;
  readonly timeoutSeconds?: number;
  readonly extraArgs?: readonly string[];
  /** Keep the message trace (costly at high call counts). */
  readonly trace?: boolean;
}

export interface SippResult {
  readonly exitCode: number | null;
  readonly trace: string;
  readonly stdout: string;
  readonly stderr: string;
  readonly successful: number;
  readonly failed: number;
  /** Wire messages sipp sent or received, in order, as their first lines. */
  readonly firstLines: string[];
}

/** sipp's exit status when it could not bind its ports (EXIT_BIND_ERROR): nothing was sent. */
const SIPP_BIND_ERROR = 254;
const BIND_ATTEMPTS = 3;

/**
 * Runs sipp once; again on fresh ports when the ones picked were taken between the pick and
 * sipp's bind (other tests' processes bind ports of the same loopback ranges meanwhile).
 */
export async function runSipp(run: SippRun): Promise<SippResult> {
  let result = await runSippOnce(run);
  for (let attempt = 1; attempt < BIND_ATTEMPTS && result.exitCode === SIPP_BIND_ERROR; attempt++)
    result = await runSippOnce(run);
  return result;
}

async function runSippOnce(run: SippRun): Promise<SippResult> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-sipp-'));
  const localPort = await freeSipPort();
  const trace = join(dir, 'messages.log');
  const timeout = run.timeoutSeconds ?? 20;
  const args = [
    `127.0.0.1:${run.port}`,
    '-sf',
    join(SIPP_FIXTURES, run.scenario),
    '-s',
    run.service,
    '-i',
    '127.0.0.1',
    '-p',
    String(localPort),
    '-t',
    run.transport === 'tcp' ? 't1' : 'u1',
    '-m',
    String(run.calls ?? 1),
    '-r',
    String(run.rate ?? 10),
    '-l',
    String(run.limit ?? run.calls ?? 1),
    '-d',
    String(run.pauseMs ?? 100),
    '-timeout',
    `${timeout}s`,
    '-timeout_error',
    '-nostdin',
    '-nr',
    '-mp',
    String(await freeSipPort()),
    '-trace_stat',
    '-stf',
    join(dir, 'stats.csv'),
    ...(run.trace === false ? [] : ['-trace_msg', '-message_file', trace]),
    ...(run.extraArgs ?? []),
  ];
  const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const guard = setTimeout(
    () => {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    },
    (timeout + 10) * 1000,
  );
  const exitCode = await new Promise<number | null>((done) =>
    child.on('close', (code) => done(code)),
  );
  clearTimeout(guard);
  let traceText = '';
  try {
    traceText = readFileSync(trace, 'utf8');
  } catch {
    traceText = '';
  }
  const stats = readStats(dir);
  rmSync(dir, { recursive: true, force: true });
  const firstLines = [
    ...traceText.matchAll(/^-+ .*\n(?:UDP|TCP) message (sent|received)[^\n]*\n\n([^\n]+)/gm),
  ].map((m) => `${m[1]} ${(m[2] ?? '').trimEnd()}`);
  return {
    exitCode,
    trace: traceText,
    stdout,
    stderr,
    successful: stats.successful,
    failed: stats.failed,
    firstLines,
  };
}

function readStats(dir: string): { successful: number; failed: number } {
  const file = readdirSync(dir).find((name) => name.endsWith('.csv'));
  if (file === undefined) return { successful: -1, failed: -1 };
  const lines = readFileSync(join(dir, file), 'utf8').trim().split('\n');
  const header = (lines[0] ?? '').split(';');
  const last = (lines[lines.length - 1] ?? '').split(';');
  const column = (name: string): number => Number(last[header.indexOf(name)] ?? -1);
  return { successful: column('SuccessfulCall(C)'), failed: column('FailedCall(C)') };
}
