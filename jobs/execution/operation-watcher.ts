/**
 * Waits for operations to finish, for callers that answer inline (reads run with a deadline).
 * It polls the ledger with a short, growing interval: reads finish in milliseconds, and polling
 * needs no extra connection or subscription per process.
 */
import type { Operation } from '../ledger/operation.ts';
import { isTerminal } from '../ledger/operation.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';

/** First poll interval; doubles up to the cap so a slow operation costs few reads. */
const FIRST_POLL_MS = 5;
const MAX_POLL_MS = 100;

export async function waitForOutcome(
  ledger: OperationLedger,
  tenantId: string,
  operationId: string,
  options: { timeoutMs: number; signal?: AbortSignal; includeUnknown?: boolean },
): Promise<Operation | undefined> {
  const deadline = Date.now() + options.timeoutMs;
  let interval = FIRST_POLL_MS;
  for (;;) {
    const op = await ledger.get(tenantId, operationId);
    if (op && (isTerminal(op.state) || (options.includeUnknown === true && op.state === 'UNKNOWN')))
      return op;
    const left = deadline - Date.now();
    if (left <= 0 || options.signal?.aborted) return op;
    await new Promise((resolve) => setTimeout(resolve, Math.min(interval, left)));
    interval = Math.min(MAX_POLL_MS, interval * 2);
  }
}
