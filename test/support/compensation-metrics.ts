/** Reads callgate_compensations_total in this process, for tests that count compensation outcomes. */
import { compensations } from '../../jobs/action-metrics.ts';

export async function compensationCount(action: string, outcome: string): Promise<number> {
  const metric = await compensations.get();
  return (
    metric.values.find((v) => v.labels.action === action && v.labels.outcome === outcome)?.value ??
    0
  );
}
