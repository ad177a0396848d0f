/**
 * Closes a BullMQ worker that may still be connecting. Closed before its connection is ready,
 * BullMQ's connection emits an 'error' nobody listens to any more, and the process dies of it (a
 * SIGTERM right after start: test/integration/foundation/startup.test.ts). So it waits for the
 * connection first, a bounded time: with Redis away it closes anyway.
 */
import type { Worker } from 'bullmq';

const READY_WAIT_MS = 2_000;

export async function closeWorker(worker: Worker): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    worker.waitUntilReady().catch(() => undefined),
    new Promise((resolve) => (timer = setTimeout(resolve, READY_WAIT_MS))),
  ]);
  clearTimeout(timer);
  await worker.close();
}
