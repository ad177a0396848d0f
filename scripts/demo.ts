/**
 * `npm run demo`: places one real SIP call to callgate and prints what happened (see
 * gateway/demo/demo-call.ts). By default it starts a fresh callgate of its own and stops it after;
 * `--attach` calls a running one instead (`npm start` in another terminal).
 *
 *   npm run demo
 *   npm run demo -- --attach --sandbox URL [--sip 127.0.0.1:5060] [--http http://127.0.0.1:8080]
 *                           [--operator http://127.0.0.1:8081] [--token-env VAR]
 *
 * `--token-env` names the environment variable holding an operator token with calls:read and
 * operations:read (none: the attached callgate's operator API is open, as on loopback by default).
 *
 * Exit code 0 when the story held, 1 when it did not (the reasons are printed), 2 on bad arguments.
 */
import { runDemo, type DemoOptions } from '../gateway/demo/demo-call.ts';
import { formatDemoReport } from '../gateway/demo/demo-report.ts';

function parseArgs(argv: readonly string[]): DemoOptions {
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const known = new Set(['--attach', '--sip', '--http', '--operator', '--token-env', '--sandbox']);
  const unknown = argv.filter(
    (arg, i) => arg.startsWith('--') && !known.has(arg) && !known.has(argv[i - 1] ?? ''),
  );
  if (unknown.length > 0) {
    process.stderr.write(
      `callgate demo: unknown option ${unknown.join(' ')}\nusage: npm run demo [-- --attach --sandbox url [--sip host:port] [--http url] [--operator url] [--token-env VAR]]\n`,
    );
    process.exit(2);
  }
  if (!argv.includes('--attach')) return {};
  const [sipHost = '127.0.0.1', sipPort = '5060'] = (value('--sip') ?? '127.0.0.1:5060').split(
    /:(?=\d+$)/,
  );
  const sandbox = value('--sandbox');
  const tokenEnv = value('--token-env');
  if (sandbox === undefined) {
    // Without the sandbox the restaurant confirms at once: no change of mind, no hang-up before the result.
    process.stderr.write(
      "callgate demo: --attach needs --sandbox URL (callgate logs it as 'sandbox systems of record listening')\n",
    );
    process.exit(2);
  }
  return {
    attach: {
      sipHost,
      sipPort: Number(sipPort),
      httpUrl: value('--http') ?? 'http://127.0.0.1:8080',
      operatorUrl: value('--operator') ?? 'http://127.0.0.1:8081',
      ...(tokenEnv !== undefined && { operatorToken: process.env[tokenEnv] ?? '' }),
      sandboxUrl: sandbox,
    },
  };
}

const options = parseArgs(process.argv.slice(2));
const started = Date.now();
const report = await runDemo({
  ...options,
  progress: (line) =>
    process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s] ${line}\n`),
});
process.stdout.write(`${formatDemoReport(report)}\n`);
process.exit(report.ok ? 0 : 1);
