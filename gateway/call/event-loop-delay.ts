/**
 * How late the event loop runs, as admission reads it: the 99th percentile of
 * perf_hooks.monitorEventLoopDelay over a short recent window, less the sampling resolution (the
 * histogram records each sample's whole interval, so an idle loop reads the resolution itself).
 * Windows are WINDOW_MS long; the reading is the worse of the last full window and the one in
 * progress, so it rises within one window and recovers within two once the loop is on time.
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
  stop(): void;
}

function p99Ms(histogram: IntervalHistogram): number {
  if (histogram.count === 0) return 0;
  return Math.max(0, histogram.percentile(99) / 1e6 - RESOLUTION_MS);
}

export function monitorEventLoop(): EventLoopDelay {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  let lastWindowMs = 0;
  const roll = setInterval(() => {
    lastWindowMs = p99Ms(histogram);
    histogram.reset();
  }, WINDOW_MS);
  roll.unref();
  return {
    delayMs: () => Math.max(lastWindowMs, p99Ms(histogram)),
    stop: () => {
      clearInterval(roll);
      histogram.disable();
    },
  };
}
