/**
 * Class: times compared with the calling process's clock. Two worker processes whose clocks are
 * 30 s apart (libfaketime) share one tenant's action with maxConcurrent 1 and a slow provider. The
 * leases, deadlines and grace they compare are all on the Redis server's clock, so the worker whose
 * clock runs ahead does not find fresh operations past their admission deadline, and neither finds
 * the other's lease expired: the sandbox never sees two of the tenant's bookings at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOK, booking, startHarness, type Harness } from '../../support/action-harness.ts';
import { waitFor, type StartedProcess } from '../../support/processes.ts';
import { LIBFAKETIME } from '../../../bench/chaos/chaos-processes.ts';
import { startWorkerProcess, stopWorkerProcess } from '../../support/worker-process.ts';

const TENANT = 'tenant-skewed-workers';
const BOOKINGS = 6;
/** Long enough that both workers hold jobs while a booking is at the sandbox. */
const SLOW_BOOKING_MS = 700;

let h: Harness;
const workers: StartedProcess[] = [];
beforeAll(async () => {
  h = await startHarness({
    tenants: {
      [TENANT]: {
        book_table: { ...BOOK, maxConcurrent: 1, admissionDeadlineMs: 20_000, deadlineMs: 40_000 },
      },
    },
    workers: false,
  });
  await h.sandbox.addRule({
    fault: `latency=${SLOW_BOOKING_MS}`,
    service: 'bookings',
    operation: 'book',
    tenant: TENANT,
  });
  // One worker 30 s ahead of this machine's clock, one 30 s behind.
  // libfaketime preloaded into node itself: the faketime wrapper forks, and a stop would reach
  // only the wrapper and leave the worker running.
  for (const offset of ['+30s', '-30s'])
    workers.push(
      await startWorkerProcess(h, {
        env: { LD_PRELOAD: LIBFAKETIME, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      }),
    );
});
afterAll(async () => {
  for (const w of workers) await stopWorkerProcess(w);
  await h.close();
});

describe('when worker clocks are 30 s apart', () => {
  it(
    'should run every booking once, one at a time, none cancelled as late',
    { timeout: 60_000 },
    async () => {
      const ids: string[] = [];
      for (let i = 0; i < BOOKINGS; i++) {
        const decision = await h.layer.admit({
          tenantId: TENANT,
          action: 'book_table',
          args: booking({ time: `1${i + 2}:00` }),
          scope: h.scope(),
        });
        if (decision.type !== 'started') throw new Error(decision.type);
        ids.push(decision.operationId);
      }
      const ops = await Promise.all(
        ids.map((id) =>
          waitFor(
            async () => {
              const op = await h.layer.ledger.get(TENANT, id);
              return op !== undefined &&
                (op.state === 'COMMITTED' ||
                  op.state === 'CANCELLED' ||
                  op.state === 'FAILED_FINAL')
                ? op
                : undefined;
            },
            40_000,
            `${id} to finish`,
          ),
        ),
      );
      expect(ops.map((op) => op.state)).toEqual(ids.map(() => 'COMMITTED'));
      expect((await h.sandbox.concurrency()).tenants[TENANT]?.operations.book?.max).toBe(1);
      expect(await h.sandbox.effects({ tenant: TENANT })).toHaveLength(BOOKINGS);
    },
  );
});
