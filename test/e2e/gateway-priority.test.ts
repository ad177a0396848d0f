/**
 * gateway.nice: the gateway process sets its event loop thread's scheduling priority at startup,
 * and a process that is not allowed to raise it says so and runs on.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/processes.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';

/** The nice value of one thread, from /proc (field 19 of stat, counted after the command name). */
function threadNice(pid: number, tid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[16]);
}

/** What processes started from this test begin with (0 unless the whole run was started niced). */
const STARTED_AT = getPriority();

describe('when gateway.nice is configured', () => {
  let callgate: CallgateProcess;
  beforeAll(async () => {
    callgate = await startCallgate({
      script: { name: 'gateway-priority', greeting: 'Hello.', fallback: 'Anything else?' },
      overrides: (config) => {
        (config.gateway as Record<string, unknown>).nice = 4;
      },
    });
  }, 40_000);
  afterAll(async () => callgate?.stop());

  it('should run the event loop thread at that priority and leave the threads started before it alone', () => {
    const pid = callgate.proc.child.pid as number;
    expect(threadNice(pid, pid)).toBe(4);
    const others = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .filter((tid) => tid !== pid);
    expect(others.length).toBeGreaterThan(0);
    expect(others.some((tid) => threadNice(pid, tid) === STARTED_AT)).toBe(true);
    const line = callgate.proc
      .stdout()
      .split('\n')
      .find((l) => l.includes('scheduling priority set'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 'info', nice: 4, previous_nice: STARTED_AT });
  });
});

describe('when the process may not raise its priority', () => {
  it('should report the refusal as an outcome and keep running at the priority it had', () => {
    // The same user without CAP_SYS_NICE (root drops it from the bounding set, so the repository
    // stays readable wherever it was cloned) asks for -5: the kernel refuses.
    expect(STARTED_AT).toBeGreaterThan(-5);
    const script = `
      import { setThreadNice } from './gateway/process-priority.ts';
      import { getPriority } from 'node:os';
      const outcome = setThreadNice(-5);
      console.log(JSON.stringify({ outcome, after: getPriority() }));
    `;
    const node = [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script];
    // A user other than root has no CAP_SYS_NICE to drop.
    const command = process.getuid?.() === 0 ? ['setpriv', '--bounding-set=-sys_nice', '--inh-caps=-sys_nice', ...node] : node;
    const run = spawnSync(command[0] as string, command.slice(1), {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { outcome: Record<string, unknown>; after: number };
    expect(result.outcome).toMatchObject({ applied: false, nice: -5, previous: STARTED_AT, code: 'EACCES' });
    expect(result.after).toBe(STARTED_AT);
  });
});
