/**
 * The gateway's scheduling priority (`gateway.nice`). A voice gateway's event loop has a 20 ms
 * deadline on every call; when a neighbour or a kernel thread takes its core, every call's audio
 * waits. With a negative nice value the kernel lets callgate's loop go first when it wakes. Measured
 * on a 2-core machine with a CPU-bound process sharing callgate's core, 500 model sessions: added
 * latency p99 12 ms at nice -10 against 196-641 ms at nice 0 (bench/RESULTS.md, issue 4).
 *
 * Linux sets a nice value per thread: this sets the calling thread's, which is the event loop when
 * called from main. Threads that exist already (the collector's helpers, libuv's pool) keep theirs;
 * processes started later (none by the gateway) would inherit it.
 *
 * The kernel weighs a thread's nice value within its scheduling group (the container's cgroup, or
 * a login session's autogroup): it puts the loop ahead of the process's own other threads, and
 * moves the group's share of the core towards the loop's core. It does not reach past the group:
 * a gateway pod that must not share its cores at all needs whole CPUs (requests equal to limits,
 * with the kubelet's static CPU manager), which the Helm chart's README describes.
 */
import { getPriority, setPriority } from 'node:os';
import type { Logger } from '../config/log.ts';

export type NiceOutcome =
  | { readonly applied: true; readonly nice: number; readonly previous: number }
  | { readonly applied: false; readonly nice: number; readonly previous: number; readonly code: string; readonly message: string };

/** Sets the calling thread's nice value; a refusal (no CAP_SYS_NICE) is an outcome, not a throw. */
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
      code: typeof info?.code === 'string' ? info.code : typeof code === 'string' ? code : 'UNKNOWN',
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
    log.info('scheduling priority set', { nice: outcome.nice, previous_nice: outcome.previous });
  } else {
    log.warn('scheduling priority not set: gateway.nice below 0 needs CAP_SYS_NICE or root; running at the priority it was started with', {
      nice: outcome.nice,
      current_nice: outcome.previous,
      code: outcome.code,
    });
  }
  return outcome;
}
