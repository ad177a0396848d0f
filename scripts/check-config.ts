/**
 * `npm run check -- --config FILE`: validates a configuration without starting anything, lists
 * every problem by path, and prints each agent's tools as the model will see them.
 * Exit code 0 when valid, 2 when not (or on bad arguments). `--json` prints the report as JSON.
 */
import { checkConfig, formatCheckReport } from '../gateway/check/config-check.ts';

const argv = process.argv.slice(2);
const at = argv.indexOf('--config');
const path = at >= 0 ? argv[at + 1] : process.env.CALLGATE_CONFIG;
if (
  path === undefined ||
  path === '' ||
  argv.some((a) => a.startsWith('--') && a !== '--config' && a !== '--json')
) {
  process.stderr.write('usage: npm run check -- --config FILE [--json]\n');
  process.exit(2);
}
const report = await checkConfig(path);
process.stdout.write(
  argv.includes('--json') ? `${JSON.stringify(report, null, 2)}\n` : formatCheckReport(report),
);
process.exit(report.valid ? 0 : 2);
