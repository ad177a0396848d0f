/**
 * Runs the sandbox systems of record alone (`npm run sandbox`): listens on SANDBOX_HOST
 * (127.0.0.1) and SANDBOX_PORT (0: any free port), prints the URL and stops on SIGINT/SIGTERM.
 */
import { rootLogger } from '../../../config/log.ts';
import { startSandbox } from './sandbox-server.ts';

const host = process.env.SANDBOX_HOST ?? '127.0.0.1';
const port = Number(process.env.SANDBOX_PORT ?? '0');
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(
    `sandbox: SANDBOX_PORT must be a port number (0-65535), got ${process.env.SANDBOX_PORT}\n`,
  );
  process.exit(2);
}

const log = rootLogger().child({ component: 'sandbox' });
const sandbox = await startSandbox({ host, port, log });
process.stdout.write(`sandbox listening on ${sandbox.url}\n`);
log.info('sandbox started', { url: sandbox.url });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    sandbox.close().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error('sandbox did not close cleanly', { error });
        process.exit(1);
      },
    );
  });
}
