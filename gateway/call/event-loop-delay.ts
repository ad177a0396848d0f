/**
 * How late the event loop runs, as admission reads it: the 90th percentile of
 * perf_hooks.monitorEventLoopDelay over a short recent window, less the sampling resolution (the
 * histogram records each sample's whole interval, so an idle loop reads the resolution itself).
 * Windows are WINDOW_MS long; the reading is the worse of the last full window and the one in
 * progress, so it rises within one window and recovers within two once the loop is on time.
 *
 * The 90th and not the 99th percentile: at about 100 samples a window the 99th is the window's
 * worst sample, so one pause (a garbage collection, a module compiled on first use) would refuse
 * calls for two seconds; a loop that is overloaded is late on most samples, not on one.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Sampling interval of the monitor: well under the 20 ms audio frame, cheap (100 timer runs a second). */
const RESOLUTION_MS = 10;
/**
 * One second: long enough for a p99 of about 100 samples, short enough that a gateway refusing
 * calls for a burst takes them again within two seconds of the burst's end.
 */
export const WINDOW_MS = 1_000;

export interface EventLoopDelay {
  /** The statistic in ms (0 on an idle loop). */
  readonly delayMs: () => number;
  /** Forgets what was measured so far (the process's own start is not load). */
  reset(): void;
  stop(): void;
}

const PERCENTILE = 90;

function lateMs(histogram: IntervalHistogram): number {
  if (histogram.count === 0) return 0;
  return Math.max(0, histogram.percentile(PERCENTILE) / 1e6 - RESOLUTION_MS);
}

export function monitorEventLoop(): EventLoopDelay {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  let lastWindowMs = 0;
  const roll = setInterval(() => {
    lastWindowMs = lateMs(histogram);
    histogram.reset();
  }, WINDOW_MS);
  roll.unref();
  return {
    delayMs: () => Math.max(lastWindowMs, lateMs(histogram)),
    reset: () => {
      lastWindowMs = 0;
      histogram.reset();
    },
    stop: () => {
      clearInterval(roll);
      histogram.disable();
    },
  };
}
