/**
 * gateway.nice: the gateway process sets its event loop thread's scheduling priority at startup,
 * gives the processes it starts later the priority it started with, and when it is not allowed to
 * raise its priority it says so and runs on.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/processes.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';

/** What processes started from this test begin with (0 unless the whole run was started niced). */
const STARTED_AT = getPriority();
const IS_ROOT = process.getuid?.() === 0;
/** Root runs with CAP_SYS_NICE; this drops it (from the bounding set, so files stay readable). */
const WITHOUT_CAP_SYS_NICE = ['setpriv', '--bounding-set=-sys_nice', '--inh-caps=-sys_nice'];
const SCRIPT = { name: 'gateway-priority', greeting: 'Hello.', fallback: 'Anything else?' };

/** The nice value of one thread, from /proc (field 19 of stat, counted after the command name). */
function threadNice(pid: number, tid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[16]);
}

function logLine(callgate: CallgateProcess, message: string): Record<string, unknown> | undefined {
  const line = callgate.proc
    .stdout()
    .split('\n')
    .find((l) => l.includes(message));
  return line === undefined ? undefined : (JSON.parse(line) as Record<string, unknown>);
}

let callgate: CallgateProcess | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
});

function withNice(nice: number) {
  return (config: Record<string, unknown>): void => {
    (config.gateway as Record<string, unknown>).nice = nice;
  };
}

describe('when gateway.nice is configured', () => {
  it('should run the event loop thread at that priority and leave the threads started before it alone', async () => {
    // A lower priority than the run's: allowed for any user.
    const nice = Math.min(19, STARTED_AT + 4);
    const cg = await startCallgate({ script: SCRIPT, overrides: withNice(nice) });
    callgate = cg;
    const pid = cg.proc.child.pid as number;
    expect(threadNice(pid, pid)).toBe(nice);
    const others = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .filter((tid) => tid !== pid);
    expect(others.length).toBeGreaterThan(0);
    expect(others.some((tid) => threadNice(pid, tid) === STARTED_AT)).toBe(true);
    expect(logLine(cg, 'scheduling priority set')).toMatchObject({
      level: 'info',
      nice,
      previous_nice: STARTED_AT,
    });
  }, 40_000);
});

describe('when the gateway may not raise its priority', () => {
  it.skipIf(!IS_ROOT)(
    'should log the refusal and run on at the priority it was started with',
    async () => {
      const cg = await startCallgate({
        script: SCRIPT,
        overrides: withNice(STARTED_AT - 5),
        commandPrefix: WITHOUT_CAP_SYS_NICE,
      });
      callgate = cg;
      // startCallgate returned: /readyz answers and the process logged "callgate ready".
      const pid = cg.proc.child.pid as number;
      expect(threadNice(pid, pid)).toBe(STARTED_AT);
      expect(logLine(cg, 'scheduling priority not set')).toMatchObject({
        level: 'warn',
        nice: STARTED_AT - 5,
        current_nice: STARTED_AT,
        code: 'EACCES',
      });
      expect(logLine(cg, 'scheduling priority set')).toBeUndefined();
      expect((await cg.get<{ active: unknown[] }>('/v1/calls')).active).toEqual([]);
    },
    40_000,
  );
});

describe('when the gateway starts a process after raising its priority', () => {
  it.skipIf(!IS_ROOT)('should give that process the priority the gateway started with', () => {
    // The child node raises its loop's priority, starts a process that inherits it, and releases it.
    const script = `
      import { spawn } from 'node:child_process';
      import { readFileSync } from 'node:fs';
      import { applyGatewayNice, releaseInheritedPriority } from './gateway/process-priority.ts';
      const quiet = { info() {}, warn() {} };
      const niceOf = (pid) => { const s = readFileSync('/proc/' + pid + '/stat', 'utf8'); return Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[16]); };
      applyGatewayNice(${STARTED_AT - 3}, quiet);
      const kept = spawn('sleep', ['5']);
      const released = spawn('sleep', ['5']);
      releaseInheritedPriority(released.pid);
      console.log(JSON.stringify({ kept: niceOf(kept.pid), released: niceOf(released.pid) }));
      kept.kill();
      released.kill();
    `;
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 20_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
      kept: number;
      released: number;
    };
    expect(result).toEqual({ kept: STARTED_AT - 3, released: STARTED_AT });
  });
});
