/**
 * What one log line costs: lines per second through config/log.ts for a line of a call (a child
 * logger with the call's and the operation's correlation fields, a few fields of its own and a
 * registered secret to look for), written two ways:
 *
 *   sink     a test sink that drops the line: the cost of building and scrubbing it
 *   stdout   the process's real destination: run with stdout sent to /dev/null or a file
 *
 *   npm run bench -- log [--lines 200000] [--rounds 5] > /dev/null
 *
 * Results go to stderr (stdout carries the lines themselves).
 */
import { Logger, registerSecret } from '../config/log.ts';
import { argument } from './args.ts';

const LINES = Number(argument('lines', '200000'));
const ROUNDS = Number(argument('rounds', '5'));

registerSecret('sk-bench-0123456789abcdef');

function callLogger(root: Logger): Logger {
  return root
    .child({ role: 'gateway', gateway_id: 'gw-bench' })
    .child({ session_id: 'call_01JBENCH0000000000000000', sip_call_id: 'a84b4c76e66710' })
    .child({ tenant_id: 'demo', operation_id: 'op_01JBENCH00000000000000000' });
}

function writeLines(log: Logger, lines: number): number {
  const started = process.hrtime.bigint();
  for (let i = 0; i < lines; i += 1) {
    log.info('operation committed', {
      turn_id: i,
      response_id: 'resp_bench',
      idempotency_key: 'idk_demo_booking_0123456789',
      state: 'COMMITTED',
      attempt: 1,
      latency_ms: 12.5,
    });
  }
  return Number(process.hrtime.bigint() - started) / 1e9;
}

function measure(name: string, root: Logger): void {
  const log = callLogger(root);
  writeLines(log, Math.min(LINES, 20_000)); // warm-up
  const rates: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) rates.push(LINES / writeLines(log, LINES));
  rates.sort((a, b) => a - b);
  const median = rates[Math.floor(rates.length / 2)] ?? 0;
  process.stderr.write(
    `${name.padEnd(8)} lines/s median ${Math.round(median).toLocaleString('en')} ` +
      `(min ${Math.round(rates[0] ?? 0).toLocaleString('en')}, ` +
      `max ${Math.round(rates.at(-1) ?? 0).toLocaleString('en')}) over ${ROUNDS} x ${LINES}\n`,
  );
}

measure('sink', new Logger({ level: 'info', sink: { write: () => undefined } }));
measure('stdout', new Logger({ level: 'info' }));
