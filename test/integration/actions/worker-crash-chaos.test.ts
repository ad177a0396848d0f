/**
 * Worker processes killed with SIGKILL at random moments while 200 operations run on both sandbox
 * providers: idempotent bookings and non-idempotent refunds. Afterwards every operation must be
 * terminal, and the sandbox must hold exactly one effect for each committed operation and none for
 * any other: a crash may cost time, never a lost or a doubled effect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HistoryEntry, Operation } from '../../../jobs/ledger/operation.ts';
import { BOOK, REFUND, startHarness, type Harness } from '../../support/action-harness.ts';
import { isAlive, startTs, waitFor, type StartedProcess } from '../../support/processes.ts';

const TENANT = 'tenant-chaos';
const OPERATIONS = 200;
const KILL_POINTS = 20;
/** Worker processes running at once; each kill is followed by a restart in the same slot. */
const SLOTS = 2;
/** Held by the sandbox before it commits, so a kill often lands while a request is in flight. */
const BOOK_LATENCY_MS = 200;
const REFUND_LATENCY_MS = 250;
/** Requests of a batch arrive up to this far apart. */
const ADMIT_GAP_MAX_MS = 40;
/** After a batch, the kill comes at a random moment within this range: before, during or after the requests. */
const KILL_DELAY_MIN_MS = 0;
const KILL_DELAY_MAX_MS = 700;
/** A restarted worker process (tsx compiles on start) must be up within this time. */
const WORKER_READY_TIMEOUT_MS = 30_000;
/** After the last kill: the workers' own sweep (FAST_WORKER timings) must settle everything in this time. */
const SETTLE_TIMEOUT_MS = 45_000;

const ACTIONS = {
  // Generous queues and deadlines: admission pressure and deadlines are not what this test is
  // about, and on a busy shared machine a restarted worker can take 20 s to come up.
  book_table: {
    ...BOOK,
    maxConcurrent: 16,
    maxQueued: 1_000,
    admissionDeadlineMs: 60_000,
    deadlineMs: 120_000,
  },
  refund: {
    ...REFUND,
    maxConcurrent: 16,
    maxQueued: 1_000,
    admissionDeadlineMs: 60_000,
    deadlineMs: 120_000,
  },
};

interface WorkerSlot {
  process: StartedProcess;
  startedAt: number;
  /** When the process was first seen ready (for the report). */
  readyAt?: number;
}

let h: Harness;
const slots: WorkerSlot[] = [];
const everyProcess: StartedProcess[] = [];

function startWorker(): WorkerSlot {
  const worker = startTs('jobs/worker-main.ts', {
    env: {
      CALLGATE_CONFIG: h.configPath,
      CALLGATE_HTTP_PORT: '0',
      CALLGATE__http__operator__port: '0',
      CALLGATE_LOG_LEVEL: 'info',
      REDIS_URL: h.config.redis.url ?? '',
    },
  });
  everyProcess.push(worker);
  return { process: worker, startedAt: Date.now() };
}

function ready(slot: WorkerSlot): boolean {
  const pid = slot.process.child.pid;
  const up = pid !== undefined && isAlive(pid) && slot.process.stdout().includes('worker ready');
  if (up) slot.readyAt ??= Date.now();
  return up;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const between = (min: number, max: number) => min + Math.floor(Math.random() * (max - min));

beforeAll(async () => {
  h = await startHarness({
    tenants: { [TENANT]: ACTIONS },
    workers: false,
    worker: { concurrency: 4 },
  });
  await h.sandbox.addRule({
    fault: `latency=${BOOK_LATENCY_MS}`,
    service: 'bookings',
    operation: 'book',
  });
  await h.sandbox.addRule({
    fault: `latency=${REFUND_LATENCY_MS}`,
    service: 'payments',
    operation: 'refund',
  });
});

afterAll(async () => {
  for (const worker of everyProcess) worker.kill();
  await Promise.all(everyProcess.map((p) => p.exited));
  await h.close();
});

/** The i-th request: even ones book a slot nobody else books, odd ones refund a small amount. */
function request(i: number): { action: 'book_table' | 'refund'; args: Record<string, unknown> } {
  if (i % 2 === 0) {
    const date = new Date(Date.UTC(2033, 0, 1) + (i / 2) * 86_400_000).toISOString().slice(0, 10);
    return {
      action: 'book_table',
      args: { restaurant: 'sushi-kaito', date, time: '20:00', party_size: 2, name: `Guest ${i}` },
    };
  }
  // Two refunds per order of at most 5 EUR each: even a doubled refund could not exceed a balance
  // (every order is at least 50 EUR), so a double effect would show up as two effects, not as a refusal.
  const n = (i - 1) / 2;
  return {
    action: 'refund',
    args: {
      order_id: `ord_${1001 + (n % 50)}`,
      amount_cents: 100 + (n % 400),
      reason: `chaos ${i}`,
    },
  };
}

describe('when worker processes are killed with SIGKILL at random moments during 200 operations', () => {
  it(
    'should end every operation terminal with exactly one sandbox effect per committed operation and none otherwise',
    { timeout: 170_000 },
    async () => {
      const began = Date.now();
      for (let s = 0; s < SLOTS; s++) slots.push(startWorker());

      const admitted: { id: string; action: string }[] = [];
      const admit = async (i: number) => {
        const { action, args } = request(i);
        const decision = await h.layer.admit({ tenantId: TENANT, action, args, scope: h.scope() });
        if (decision.type !== 'started')
          throw new Error(`request ${i} was not admitted: ${JSON.stringify(decision)}`);
        admitted.push({ id: decision.operationId, action });
      };

      let kills = 0;
      let killsWithRequestsInFlight = 0;
      const startupMs: number[] = [];
      const unexpectedExits: string[] = [];
      // Each kill point: a batch of requests arrives, a random moment passes, a live worker dies.
      for (let point = 0; point < KILL_POINTS; point++) {
        const pick = await waitFor(
          async () => {
            // A worker that died without being killed is a finding; it is replaced so the run goes on.
            slots.forEach((slot, index) => {
              if (slot.process.child.exitCode === null && slot.process.child.signalCode === null)
                return;
              unexpectedExits.push(
                `exit ${String(slot.process.child.exitCode ?? slot.process.child.signalCode)}: ${slot.process.stderr().slice(-500)}`,
              );
              slots[index] = startWorker();
            });
            const up = slots
              .map((slot, index) => ({ slot, index }))
              .filter(({ slot }) => ready(slot));
            return up[between(0, up.length)];
          },
          WORKER_READY_TIMEOUT_MS,
          'a worker process to be ready',
        );
        const batch = OPERATIONS / KILL_POINTS;
        for (let i = point * batch; i < (point + 1) * batch; i++) {
          await admit(i);
          await sleep(between(0, ADMIT_GAP_MAX_MS));
        }
        await sleep(between(KILL_DELAY_MIN_MS, KILL_DELAY_MAX_MS));
        const inFlight = (await h.sandbox.concurrency()).tenants[TENANT]?.current ?? 0;
        if (pick.slot.readyAt !== undefined)
          startupMs.push(pick.slot.readyAt - pick.slot.startedAt);
        // The other slot always holds a process (up or starting): one or two are alive at every moment.
        pick.slot.process.child.kill('SIGKILL');
        await pick.slot.process.exited;
        kills++;
        if (inFlight > 0) killsWithRequestsInFlight++;
        slots[pick.index] = startWorker();
      }
      const killPhaseMs = Date.now() - began;

      // No more kills: the surviving workers' recovery sweep and reconciler must settle everything.
      const settleBy = Date.now() + SETTLE_TIMEOUT_MS;
      let ops: Operation[] = [];
      for (;;) {
        ops = await Promise.all(admitted.map(({ id }) => h.layer.get(TENANT, id)));
        const open = ops.filter(
          (op) => !['COMMITTED', 'FAILED_FINAL', 'CANCELLED'].includes(op.state),
        );
        if (open.length === 0) break;
        if (Date.now() > settleBy) {
          const summary = await Promise.all(
            open.slice(0, 5).map(async (op) => {
              const job = await h.layer.queues.jobState(
                op.providerIdempotent ? 'ops-mutations' : 'ops-mutations-unsafe',
                op.operationId,
              );
              return `${op.operationId} ${op.action} ${op.state} attempt=${op.attempt} sending=${String(op.sending)} job=${job}`;
            }),
          );
          throw new Error(
            `${open.length} operations still open after settling: ${summary.join('; ')}`,
          );
        }
        await sleep(250);
      }

      expect(admitted).toHaveLength(OPERATIONS);
      expect(kills).toBeGreaterThanOrEqual(KILL_POINTS);
      expect(unexpectedExits, 'worker processes that died on their own').toEqual([]);

      const counts = await h.sandbox.counts();
      // Never two effects for one reference, for any operation the sandbox saw.
      const doubled = Object.entries(counts.effects).filter(([, n]) => n > 1);
      expect(doubled, 'references with more than one effect').toEqual([]);

      const committed = ops.filter((op) => op.state === 'COMMITTED');
      const notCommitted = ops.filter((op) => op.state !== 'COMMITTED');
      for (const op of ops) {
        const effects = await h.sandbox.effects({ reference: op.operationId });
        expect(effects, `${op.operationId} (${op.action}, ${op.state}) effects`).toHaveLength(
          op.state === 'COMMITTED' ? 1 : 0,
        );
        if (op.state === 'COMMITTED')
          expect(op.providerRef, `${op.operationId} ledger provider ref`).toBe(
            effects[0]?.providerRef,
          );
      }
      // The sandbox committed nothing that is not one of ours.
      const allEffects = await h.sandbox.effects({ tenant: TENANT });
      expect(allEffects).toHaveLength(committed.length);

      // Most operations must have gone through: a run that failed everything would prove nothing.
      const committedBookings = committed.filter((op) => op.action === 'book_table').length;
      const committedRefunds = committed.filter((op) => op.action === 'refund').length;
      expect(committedBookings).toBeGreaterThanOrEqual(OPERATIONS / 2 - 10);
      expect(committedRefunds).toBeGreaterThanOrEqual(OPERATIONS / 2 - 10);

      // Causal order in each history: a COMMITTED operation committed once, last, after it ran.
      let reconciledRefunds = 0;
      let reconciledBookings = 0;
      for (const op of ops) {
        const history: HistoryEntry[] = await h.layer.ledger.history(TENANT, op.operationId);
        const states = history.map((e) => e.state);
        expect(states.at(-1), `${op.operationId} history ends in its state`).toBe(op.state);
        expect(states.filter((s) => s === 'COMMITTED').length).toBe(
          op.state === 'COMMITTED' ? 1 : 0,
        );
        const unknownAt = states.indexOf('UNKNOWN');
        if (op.state === 'COMMITTED' && unknownAt >= 0 && history.at(-1)?.actor === 'reconciler') {
          if (op.action === 'refund') reconciledRefunds++;
          else reconciledBookings++;
        }
        // A refund is never sent again after the outcome was lost: UNKNOWN is only left by the reconciler.
        if (op.action === 'refund') {
          for (let i = 0; i < history.length - 1; i++) {
            if (history[i]?.state === 'UNKNOWN')
              expect(history[i + 1]?.actor, `${op.operationId} leaves UNKNOWN`).toBe('reconciler');
          }
        }
      }

      const byState = Object.fromEntries(
        ['COMMITTED', 'FAILED_FINAL', 'CANCELLED'].map((s) => [
          s,
          ops.filter((op) => op.state === s).length,
        ]),
      );
      const refundRequests = ops
        .filter((op) => op.action === 'refund')
        .reduce((sum, op) => sum + (counts.requests[op.operationId] ?? 0), 0);
      console.info(
        `[chaos] ${OPERATIONS} operations, ${kills} SIGKILLs (${killsWithRequestsInFlight} with sandbox requests in flight), ` +
          `kill phase ${killPhaseMs} ms (worker start to ready: max ${Math.max(...startupMs)} ms), settled after ${Date.now() - began} ms; states ${JSON.stringify(byState)}; ` +
          `UNKNOWN->COMMITTED by reconcile: ${reconciledRefunds} refunds, ${reconciledBookings} bookings; ` +
          `refund requests sent ${refundRequests} for ${ops.filter((op) => op.action === 'refund').length} refunds; not committed ${notCommitted.length}`,
      );
    },
  );
});
