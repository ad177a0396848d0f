/**
 * The owed-compensation pass, run by workers beside the recovery sweep: it settles compensations
 * in flight (a committed one is done; one not started within its admission deadline is owed again;
 * one that ended FAILED_FINAL or otherwise CANCELLED releases its link on the original, is counted
 * as failed and logged at error) and admits compensations that are owed (they could not be
 * admitted when asked, or their admission was lost in a crash).
 */
import type { Logger } from '../../config/log.ts';
import { compensations } from '../action-metrics.ts';
import type { OperationLedger } from '../ledger/operation-ledger.ts';
import { parseRequest, reportFailed, type Compensator } from './compensator.ts';

/** Entries looked at per tenant and pass: the pass stays short; what is left waits for the next. */
const PASS_BATCH = 100;

export interface OwedCompensationPassOptions {
  readonly ledger: OperationLedger;
  readonly compensator: Compensator;
  readonly tenants: readonly string[];
  readonly log: Logger;
  /** How often the pass runs (the recovery sweep's interval). */
  readonly intervalMs: number;
}

export interface CompensationPassReport {
  settled: number;
  failed: number;
  admitted: number;
}

export class OwedCompensationPass {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<CompensationPassReport> | undefined;

  constructor(private readonly options: OwedCompensationPassOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      this.pass().catch((error: unknown) =>
        this.options.log.error('owed-compensation pass failed', { error }),
      );
    }, this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** One pass now; a pass already running is joined, not doubled. */
  pass(): Promise<CompensationPassReport> {
    this.running ??= this.run().finally(() => (this.running = undefined));
    return this.running;
  }

  private async run(): Promise<CompensationPassReport> {
    const report: CompensationPassReport = { settled: 0, failed: 0, admitted: 0 };
    for (const tenantId of this.options.tenants) {
      await this.settle(tenantId, report);
      await this.admitOwed(tenantId, report);
    }
    return report;
  }

  private async settle(tenantId: string, report: CompensationPassReport): Promise<void> {
    const { ledger, log } = this.options;
    for (const originalId of await ledger.listCompensationsInFlight(tenantId, PASS_BATCH)) {
      const outcome = await ledger.settleCompensation(tenantId, originalId);
      if (outcome.type === 'committed') {
        report.settled++;
        compensations.labels(outcome.action, 'committed').inc();
        log.info('compensation committed', {
          operation_id: originalId,
          compensation_id: outcome.compensationId,
          action: outcome.action,
        });
      } else if (outcome.type === 'reowed') {
        compensations.labels(outcome.action, 'owed').inc();
        log.warn('compensation not started within its admission deadline; owed again', {
          operation_id: originalId,
          compensation_id: outcome.compensationId,
          action: outcome.action,
        });
      } else if (outcome.type === 'released') {
        report.failed++;
        reportFailed(log, {
          originalId,
          compensationId: outcome.compensationId,
          action: outcome.action,
          state: outcome.state,
          tries: outcome.tries,
        });
      }
    }
  }

  private async admitOwed(tenantId: string, report: CompensationPassReport): Promise<void> {
    const { ledger, compensator, log } = this.options;
    for (const originalId of await ledger.listOwedCompensations(tenantId, PASS_BATCH)) {
      const owed = await ledger.owedCompensation(tenantId, originalId);
      if (owed.compensatedBy !== undefined) {
        await ledger.unlistOwedCompensation(tenantId, originalId);
        continue;
      }
      const request = parseRequest(owed.request);
      if (!request) {
        // No request (admitted meanwhile, or the original expired) or an unreadable one: nothing to admit.
        if (owed.request !== undefined)
          log.error('owed compensation is unreadable; dropped', { operation_id: originalId });
        await ledger.dropOwedCompensation(tenantId, originalId);
        continue;
      }
      try {
        const decision = await compensator.admitOwed(tenantId, originalId, request, owed.tries);
        if (decision.type === 'admitted') {
          report.admitted++;
          log.info('owed compensation admitted', {
            operation_id: originalId,
            compensation_id: decision.decision.operationId,
            action: request.action,
          });
        } else if (decision.type === 'failed') {
          report.failed++;
        } else if (decision.type === 'not_committed') {
          await ledger.dropOwedCompensation(tenantId, originalId);
        } else if (decision.type === 'already_compensated') {
          await ledger.unlistOwedCompensation(tenantId, originalId);
        }
      } catch (error) {
        // Refused for good (admitOwed dropped, counted and logged it) or Redis: the rest still get their turn.
        log.warn('owed compensation not admitted', { operation_id: originalId, error });
      }
    }
  }
}
