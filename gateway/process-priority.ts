/**
 * The gateway's scheduling priority (`gateway.nice`). A voice gateway's event loop has a 20 ms
 * deadline on every call; when another thread of its scheduling group takes its core, every call's
 * audio waits. With a negative nice value the kernel lets the loop go first when it wakes. Measured
 * on a 2-core machine with a CPU-bound process of another login session on each core, 500 model
 * sessions: added latency p99 12 ms at nice -10 against 196-641 ms at nice 0 (bench/RESULTS.md).
 *
 * Linux sets a nice value per thread: this sets the calling thread's, which is the event loop when
 * called from main. Threads that exist already (the collector's helpers, libuv's pool) keep theirs.
 * Processes the loop starts afterwards (espeak-ng and sox rendering prompts) would inherit it:
 * `releaseInheritedPriority` gives them back the priority the gateway started with.
 *
 * The kernel weighs a thread's nice value within its scheduling group (the container's cgroup, or
 * a login session's autogroup): it puts the loop ahead of the process's own other threads, and
 * moves the group's share of the CPUs towards the loop's core. It does not reach past the group (a
 * kernel thread or another pod): a gateway pod that must not share its cores at all needs whole
 * CPUs (requests equal to limits, with the kubelet's static CPU manager), which the Helm chart's
 * README describes.
 */
import { getPriority, setPriority } from 'node:os';
import type { Logger } from '../config/log.ts';

export type NiceOutcome =
  | { readonly applied: true; readonly nice: number; readonly previous: number }
  | {
      readonly applied: false;
      readonly nice: number;
      readonly previous: number;
      readonly code: string;
      readonly message: string;
    };

/** The nice value the gateway started with, once applyGatewayNice changed the loop's. */
let startedWith: number | undefined;

/**
 * Sets the calling thread's nice value. A refusal is an outcome, not a throw: lowering a nice value
 * below where the process started needs CAP_SYS_NICE (or a matching RLIMIT_NICE).
 */
export function setThreadNice(nice: number): NiceOutcome {
  const previous = getPriority();
  try {
    setPriority(nice);
    return { applied: true, nice, previous };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const info = (error as { info?: { code?: unknown } }).info;
    return {
      applied: false,
      nice,
      previous,
      code:
        typeof info?.code === 'string' ? info.code : typeof code === 'string' ? code : 'UNKNOWN',
      message: (error as Error).message,
    };
  }
}

/**
 * Applies `gateway.nice` when configured and says so in the log. Not being allowed to is a warning:
 * the gateway runs as before, at the priority it was started with.
 */
export function applyGatewayNice(nice: number | undefined, log: Logger): NiceOutcome | undefined {
  if (nice === undefined) return undefined;
  const outcome = setThreadNice(nice);
  if (outcome.applied) {
    startedWith = outcome.previous;
    log.info('scheduling priority set', { nice: outcome.nice, previous_nice: outcome.previous });
  } else {
    log.warn(
      'scheduling priority not set: the kernel refused it (a nice value below the one the process started with needs CAP_SYS_NICE or a matching RLIMIT_NICE); running at the priority it was started with',
      {
        nice: outcome.nice,
        current_nice: outcome.previous,
        code: outcome.code,
      },
    );
  }
  return outcome;
}

/**
 * A process the gateway started (a prompt renderer) goes back to the priority the gateway itself
 * started with, so that work which can wait does not run at the event loop's. Going back up needs
 * no privilege; a child that has exited already is no error.
 */
export function releaseInheritedPriority(pid: number | undefined): void {
  if (startedWith === undefined || pid === undefined) return;
  try {
    setPriority(pid, startedWith);
  } catch {
    // Exited before we got to it.
  }
}
