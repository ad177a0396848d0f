/**
 * The chaos run, for the team and for operators:
 *
 *   npm run chaos -- --minutes N [--seed S] [--calls-per-minute C] [--faults all|none|k1,k2] [--keep]
 *
 * Real worker and gateway processes, a Redis primary with a replica, the sandbox behind a fault
 * proxy, simulated calls and a seeded schedule of faults; then a checker prints the faults
 * injected, the operations and the violations per invariant, and the exit code is 1 on any
 * violation (2 on a bad argument). The same seed gives the same calls and faults. Record runs in
 * bench/RESULTS.md. `--faults` makes only some kinds of the schedule (none: the calls alone), to
 * narrow a violation down to the fault that causes it. See bench/chaos/README.md.
 */
import { argument } from '../args.ts';
import { formatReport, runChaos, totalViolations } from './chaos-run.ts';
import { FAULT_KINDS, type FaultKind } from './fault-schedule.ts';

const minutes = Number(argument('minutes', '5'));
const seed = Number(argument('seed', String(Date.now() % 1_000_000)));
const callsPerMinute = Number(argument('calls-per-minute', '90'));
const faults = argument('faults', 'all');
const faultKinds = faults === 'all' ? undefined : faults === 'none' ? [] : faults.split(',');
const unknownKinds = (faultKinds ?? []).filter(
  (kind) => !(FAULT_KINDS as readonly string[]).includes(kind),
);
if (
  !(minutes > 0 && minutes <= 240) ||
  !Number.isInteger(seed) ||
  !(callsPerMinute > 0) ||
  unknownKinds.length > 0
) {
  process.stderr.write(
    `usage: npm run chaos -- --minutes N (0 < N <= 240) [--seed S (an integer)] [--calls-per-minute C] [--faults all|none|kind,...] [--keep]\nfault kinds: ${FAULT_KINDS.join(', ')}\n`,
  );
  process.exit(2);
}

const report = await runChaos({
  minutes,
  seed,
  callsPerMinute,
  ...(faultKinds !== undefined && { faultKinds: faultKinds as FaultKind[] }),
  keep: process.argv.includes('--keep'),
  progress: (line) =>
    process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}\n`),
});
process.stdout.write(`${formatReport(report)}\n`);
process.exit(totalViolations(report) === 0 ? 0 : 1);
