/**
 * The seeded schedule of faults: four lanes that run side by side (processes, Redis, the provider
 * path, the webhook), each a sequence of faults with quiet gaps between them. Within a lane the
 * kinds come round in a shuffled order, so even a short run injects every kind of its lanes.
 * Pure: the same seed and durations give the same schedule.
 */
import type { SeededRandom } from './seeded-random.ts';

export const FAULT_KINDS = [
  'worker_sigkill',
  'worker_sigstop',
  'gateway_sigkill',
  'gateway_sigstop',
  'clock_offset',
  'redis_failover',
  'redis_restart',
  'provider_slow',
  'provider_5xx',
  'commit_then_timeout',
  'answer_dropped',
  'commit_then_5xx',
  'request_held',
  'webhook_outage',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

export type FaultLane = 'processes' | 'redis' | 'provider' | 'webhook';

export interface ScheduledFault {
  readonly kind: FaultKind;
  readonly lane: FaultLane;
  /** From the start of the run. */
  readonly atMs: number;
  /** How long the fault lasts (a pause, an outage, a provider window); 0 for a kill. */
  readonly durationMs: number;
  /** Which process slot, for process faults. */
  readonly slot: number;
  /** For clock offsets: the offset of the replacement process's clock, and whether it is a worker. */
  readonly offsetMs: number;
  readonly worker: boolean;
  /** For slow and held provider requests: how long each request is held. */
  readonly delayMs: number;
}

export interface FaultTimings {
  /** The BullMQ lock of the workers: a pause must outlast it. */
  readonly lockDurationMs: number;
  /** When a gateway counts as dead: a gateway pause must outlast it. */
  readonly deadAfterMs: number;
  /** The provider timeout: slow answers and held requests must outlast it. */
  readonly providerTimeoutMs: number;
  /** How long "not found" is distrusted after a send: a held request arrives after it. */
  readonly reconcileGraceMs: number;
}

const LANE_KINDS: Readonly<Record<FaultLane, readonly FaultKind[]>> = {
  processes: [
    'worker_sigkill',
    'worker_sigstop',
    'gateway_sigkill',
    'gateway_sigstop',
    'clock_offset',
  ],
  redis: ['redis_failover', 'redis_restart'],
  provider: [
    'provider_slow',
    'provider_5xx',
    'commit_then_timeout',
    'answer_dropped',
    'commit_then_5xx',
    'request_held',
  ],
  webhook: ['webhook_outage'],
};

/** Quiet time between two faults of a lane: [min, max] ms. Redis faults are the heaviest, so the rarest. */
const LANE_GAP_MS: Readonly<Record<FaultLane, readonly [number, number]>> = {
  processes: [2_500, 5_000],
  redis: [10_000, 18_000],
  provider: [1_000, 3_000],
  webhook: [8_000, 16_000],
};

/** Where each lane's first fault falls, so they do not all start at once. */
const LANE_FIRST_MS: Readonly<Record<FaultLane, number>> = {
  processes: 0,
  redis: 6_000,
  provider: 1_000,
  webhook: 3_000,
};

export function planFaults(
  random: SeededRandom,
  options: { startMs: number; endMs: number; timings: FaultTimings; slots: number },
): ScheduledFault[] {
  const faults: ScheduledFault[] = [];
  for (const lane of Object.keys(LANE_KINDS) as FaultLane[]) {
    const r = random.fork(lane);
    let order: FaultKind[] = [];
    let at = options.startMs + LANE_FIRST_MS[lane];
    while (at < options.endMs) {
      if (order.length === 0) order = r.shuffle(LANE_KINDS[lane]);
      const kind = order.shift() as FaultKind;
      const fault = shape(kind, lane, at, r, options.timings, options.slots);
      faults.push(fault);
      const [gapMin, gapMax] = LANE_GAP_MS[lane];
      at += fault.durationMs + r.int(gapMin, gapMax);
    }
  }
  return faults.sort((a, b) => a.atMs - b.atMs);
}

function shape(
  kind: FaultKind,
  lane: FaultLane,
  atMs: number,
  r: SeededRandom,
  t: FaultTimings,
  slots: number,
): ScheduledFault {
  const base = {
    kind,
    lane,
    atMs,
    slot: r.int(0, slots - 1),
    offsetMs: 0,
    worker: false,
    delayMs: 0,
  };
  switch (kind) {
    case 'worker_sigkill':
    case 'gateway_sigkill':
      return { ...base, durationMs: 0 };
    case 'worker_sigstop':
      // Past the lock, so BullMQ hands the job to another worker while this one still holds it.
      return { ...base, durationMs: r.int(t.lockDurationMs * 2, t.lockDurationMs * 3) };
    case 'gateway_sigstop':
      return { ...base, durationMs: r.int(t.deadAfterMs + 1_000, t.deadAfterMs + 3_000) };
    case 'clock_offset':
      return {
        ...base,
        durationMs: 0,
        worker: r.chance(0.5),
        offsetMs: r.pick([-1, 1]) * r.int(1_500, 3_000),
      };
    case 'redis_failover':
      return { ...base, durationMs: 0 };
    case 'redis_restart':
      return { ...base, durationMs: r.int(2_000, 8_000) };
    case 'webhook_outage':
      return { ...base, durationMs: r.int(5_000, 15_000) };
    case 'request_held':
      // The window; each request in it is held past the timeout and the reconcile grace.
      return {
        ...base,
        durationMs: r.int(2_000, 4_000),
        delayMs: t.reconcileGraceMs + t.providerTimeoutMs + r.int(500, 2_000),
      };
    case 'provider_slow':
      return {
        ...base,
        durationMs: r.int(2_000, 4_000),
        delayMs: t.providerTimeoutMs + r.int(300, 1_500),
      };
    default:
      return { ...base, durationMs: r.int(2_000, 4_000) };
  }
}
