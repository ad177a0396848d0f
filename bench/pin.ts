/**
 * CPU pinning for the benchmarks (--pin [--sut-cpu N]): the process under test's main thread on
 * one CPU (0 unless given), and the stand-ins for what in production runs on other machines
 * (callers, the cloud model) on the other, with all their threads, so that they do not take
 * callgate's core from it in the middle of a frame. Unpinned on this 2-core machine the kernel now
 * and then runs a stand-in on callgate's core, and those moments, not callgate's own work, set the
 * p99 (media at 500 calls: 13.5-17 ms unpinned against 3.5-6 ms pinned, in back-to-back runs of
 * the same code; bench/RESULTS.md).
 * See bench/RESULTS.md for the kernel thread that also takes one of the CPUs now and then.
 */
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { setThreadNice } from '../gateway/process-priority.ts';

interface Pinning {
  /** The CPU of the process under test's main thread; the stand-ins get another. */
  readonly sutCpu: number;
  readonly otherCpu: number;
}

/**
 * Applies what the command line asks for (--pin [--sut-cpu N], --nice N) to this process and the
 * stand-ins already started, and says what took effect, for the run's header. `self` and `others`
 * name them there.
 */
export function placeProcesses(
  argv: readonly string[],
  otherPids: readonly (number | undefined)[],
  self: string,
  others: string,
): string {
  const pinning = pinningFromArgs(argv);
  const pinned = pinning !== undefined && pinProcesses(pinning, otherPids);
  // After the stand-ins were started, so they keep their own priority.
  const nice = niceFromArgs(argv);
  const placement =
    pinning && pinned
      ? `${self} pinned to CPU ${pinning.sutCpu}, ${others} to CPU ${pinning.otherCpu}`
      : 'not pinned';
  return nice === undefined ? placement : `${placement}; ${self} at nice ${nice}`;
}

function pinningFromArgs(argv: readonly string[]): Pinning | undefined {
  if (!argv.includes('--pin')) return undefined;
  const at = argv.indexOf('--sut-cpu');
  const sutCpu = at < 0 ? 0 : Number(argv[at + 1]);
  return { sutCpu, otherCpu: sutCpu === 0 ? 1 : 0 };
}

/** Returns false (and leaves everything unpinned) where taskset is missing or there is one CPU. */
function pinProcesses(pinning: Pinning, otherPids: readonly (number | undefined)[]): boolean {
  if (otherPids.includes(undefined) || cpus().length < 2 || pinning.sutCpu >= cpus().length)
    return false;
  const self = spawnSync('taskset', ['-p', '-c', String(pinning.sutCpu), String(process.pid)], {
    stdio: 'ignore',
  });
  const others = otherPids.map((pid) =>
    spawnSync('taskset', ['-a', '-p', '-c', String(pinning.otherCpu), String(pid)], {
      stdio: 'ignore',
    }),
  );
  return self.status === 0 && others.every((other) => other.status === 0);
}

/**
 * --nice N: this thread's nice value, as gateway.nice sets the gateway's (gateway/process-priority.ts).
 * Returns the value set, or undefined (none asked, or not allowed here).
 */
function niceFromArgs(argv: readonly string[]): number | undefined {
  const at = argv.indexOf('--nice');
  if (at < 0) return undefined;
  const outcome = setThreadNice(Number(argv[at + 1]));
  // A run must not be taken for a niced one when it was not.
  if (!outcome.applied)
    process.stderr.write(`--nice ${String(argv[at + 1])} not applied: ${outcome.message}\n`);
  return outcome.applied ? outcome.nice : undefined;
}
