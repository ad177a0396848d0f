/**
 * Per-tenant concurrency: the lease semaphore holds each tenant to its action's maxConcurrent
 * across worker processes, and a tenant with a backlog does not hold up another tenant. Two real
 * worker processes with concurrency 2 each (4 execution slots in all) run the jobs; the sandbox
 * measures what actually reached it at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operation } from '../../../jobs/ledger/operation.ts';
import { BOOK, startHarness, type Harness } from '../../support/action-harness.ts';
import { isAlive, startTs, waitFor, type StartedProcess } from '../../support/processes.ts';

const TENANT_A = 'tenant-a';
const TENANT_B = 'tenant-b';
const JOBS_PER_TENANT = 20;
const MAX_CONCURRENT = 2;
const WORKER_PROCESSES = 2;
/** Jobs one worker process runs at once: two processes give the four workers of the scenario. */
const WORKER_CONCURRENCY = 2;
/**
 * Sandbox time per booking. A's requests take longer than B's: if B ran alongside A it finishes
 * long before A (about 10 x 100 ms against 10 x 500 ms, a margin that survives a loaded machine); if B queued behind A it could only finish
 * after A's last commit.
 */
const LATENCY_A_MS = 500;
const LATENCY_B_MS = 100;

const ACTIONS = {
  // A long admission deadline: a slow shared machine must not turn waiting for a lease into a cancel.
  book_table: {
    ...BOOK,
    maxConcurrent: MAX_CONCURRENT,
    maxQueued: 100,
    admissionDeadlineMs: 60_000,
  },
};

let h: Harness;
const workers: StartedProcess[] = [];

beforeAll(async () => {
  h = await startHarness({
    tenants: { [TENANT_A]: ACTIONS, [TENANT_B]: ACTIONS },
    workers: false,
    worker: { concurrency: WORKER_CONCURRENCY },
  });
  await h.sandbox.addRule({
    fault: `latency=${LATENCY_A_MS}`,
    service: 'bookings',
    operation: 'book',
    tenant: TENANT_A,
  });
  await h.sandbox.addRule({
    fault: `latency=${LATENCY_B_MS}`,
    service: 'bookings',
    operation: 'book',
    tenant: TENANT_B,
  });
  for (let i = 0; i < WORKER_PROCESSES; i++) {
    workers.push(
      startTs('jobs/worker-main.ts', {
        env: {
          CALLGATE_CONFIG: h.configPath,
          CALLGATE_HTTP_PORT: '0',
          CALLGATE__http__operator__port: '0',
          CALLGATE_LOG_LEVEL: 'info',
          REDIS_URL: h.config.redis.url ?? '',
        },
      }),
    );
  }
  await waitFor(
    async () =>
      workers.every(
        (w) =>
          w.child.pid !== undefined && isAlive(w.child.pid) && w.stdout().includes('worker ready'),
      )
        ? true
        : undefined,
    45_000,
    'both worker processes to be ready',
  );
});

afterAll(async () => {
  for (const worker of workers) worker.kill();
  await Promise.all(workers.map((w) => w.exited));
  await h.close();
});

function bookingFor(tenant: string, i: number): Record<string, unknown> {
  const offset = tenant === TENANT_A ? 0 : 1_000;
  const date = new Date(Date.UTC(2034, 0, 1) + (offset + i) * 86_400_000)
    .toISOString()
    .slice(0, 10);
  return {
    restaurant: 'bistro-nord',
    date,
    time: '19:30',
    party_size: 2,
    name: `${tenant} guest ${i}`,
  };
}

async function admitAll(tenant: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < JOBS_PER_TENANT; i++) {
    const decision = await h.layer.admit({
      tenantId: tenant,
      action: 'book_table',
      args: bookingFor(tenant, i),
      scope: h.scope(),
    });
    if (decision.type !== 'started')
      throw new Error(`${tenant} request ${i} was not admitted: ${JSON.stringify(decision)}`);
    ids.push(decision.operationId);
  }
  return ids;
}

async function settled(tenant: string, ids: readonly string[]): Promise<Operation[]> {
  return waitFor(
    async () => {
      const ops = await Promise.all(ids.map((id) => h.layer.get(tenant, id)));
      return ops.every(
        (op) => op.state === 'COMMITTED' || op.state === 'FAILED_FINAL' || op.state === 'CANCELLED',
      )
        ? ops
        : undefined;
    },
    60_000,
    `${tenant}'s operations to finish`,
  );
}

describe('when two tenants each send 20 jobs for an action limited to 2 at once, on 4 workers', () => {
  it(
    'should never run more than 2 of a tenant at the sandbox and finish B without waiting for A',
    { timeout: 120_000 },
    async () => {
      // A's whole backlog is admitted first, so B's jobs sit behind it in the queue.
      const idsA = await admitAll(TENANT_A);
      const idsB = await admitAll(TENANT_B);
      const [opsA, opsB] = await Promise.all([settled(TENANT_A, idsA), settled(TENANT_B, idsB)]);

      for (const op of [...opsA, ...opsB]) {
        expect(op.state, `${op.tenantId} ${op.operationId}`).toBe('COMMITTED');
        expect(await h.sandbox.effects({ reference: op.operationId })).toHaveLength(1);
      }

      // Concurrency as the sandbox saw it: the limit was reached and never passed, per tenant.
      const report = await h.sandbox.concurrency();
      const maxA = report.tenants[TENANT_A]?.max;
      const maxB = report.tenants[TENANT_B]?.max;
      expect(maxA, 'most of tenant A at once').toBe(MAX_CONCURRENT);
      expect(maxB, 'most of tenant B at once').toBe(MAX_CONCURRENT);
      const committedAt = (ops: Operation[]) =>
        ops.map((op) => op.committedAt ?? Number.POSITIVE_INFINITY).sort((x, y) => x - y);
      const timesA = committedAt(opsA);
      const timesB = committedAt(opsB);
      const lastA = timesA.at(-1) ?? 0;
      const firstB = timesB[0] ?? Number.POSITIVE_INFINITY;
      const lastB = timesB.at(-1) ?? Number.POSITIVE_INFINITY;
      // B ran alongside A: its first commit came while most of A was still to do, and it was done
      // well before A (had B queued behind A it could only finish after A's last commit).
      const aCommittedBeforeFirstB = timesA.filter((t) => t < firstB).length;
      expect(aCommittedBeforeFirstB, "A's commits before B's first").toBeLessThan(
        JOBS_PER_TENANT / 2,
      );
      expect(lastB, "B's last commit before A's last").toBeLessThan(lastA - LATENCY_A_MS);

      const startA = Math.min(...opsA.map((op) => op.createdAt));
      console.info(
        `[tenant-concurrency] sandbox max at once: A ${String(maxA)}, B ${String(maxB)}; ` +
          `A done after ${lastA - startA} ms, B's first commit after ${firstB - startA} ms (A had ${aCommittedBeforeFirstB} by then), B done after ${lastB - startA} ms`,
      );
    },
  );
});
