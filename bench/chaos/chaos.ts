/**
 * The chaos run, for the team and for operators:
 *
 *   npm run chaos -- --minutes N [--seed S] [--calls-per-minute C] [--keep]
 *
 * Real worker and gateway processes, a Redis primary with a replica, the sandbox behind a fault
 * proxy, simulated calls and a seeded schedule of faults; then a checker prints the faults
 * injected, the operations and the violations per invariant, and the exit code is 1 on any
 * violation (2 on a bad argument). The same seed gives the same calls and faults. Record runs in
 * bench/RESULTS.md. See bench/chaos/README.md.
 */
import { argument } from '../args.ts';
import { formatReport, runChaos, totalViolations } from './chaos-run.ts';

const minutes = Number(argument('minutes', '5'));
const seed = Number(argument('seed', String(Date.now() % 1_000_000)));
const callsPerMinute = Number(argument('calls-per-minute', '90'));
if (!(minutes > 0 && minutes <= 240) || !Number.isInteger(seed) || !(callsPerMinute > 0)) {
  process.stderr.write('usage: npm run chaos -- --minutes N (0 < N <= 240) [--seed S (an integer)] [--calls-per-minute C] [--keep]\n');
  process.exit(2);
}

const report = await runChaos({
  minutes,
  seed,
  callsPerMinute,
  keep: process.argv.includes('--keep'),
  progress: (line) => process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}\n`),
});
process.stdout.write(`${formatReport(report)}\n`);
process.exit(totalViolations(report) === 0 ? 0 : 1);
