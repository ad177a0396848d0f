/**
 * The worker role: executes operations against systems of record. Run alone with
 * `npm run start:worker` (production: its own Deployment), or inside `npm start` next to the gateway.
 */
import { pathToFileURL } from 'node:url';
import { startProcess, type ProcessContext } from './process-runtime.ts';

/** Starts the worker's components inside an already started process. */
export async function startWorkerRole(context: ProcessContext): Promise<void> {
  context.log.info('worker role started', { tenants: context.config.tenants.length });
}

async function main(): Promise<void> {
  const context = await startProcess('worker');
  await startWorkerRole(context);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
}
