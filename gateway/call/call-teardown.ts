/**
 * The end of a call, from either side: BYE (bounded), results being spoken fail, the model and
 * media closed, tool calls given a moment to be owned, the registry entry closed, and delivery
 * told the call is over (results still owed go out of band, once). Runs once; the first reason
 * wins.
 */
import { sleep, type Clock } from '../../config/clock.ts';
import type { Logger } from '../../config/log.ts';
import { observeWithExemplar } from '../../config/metrics.ts';
import type { DialogEndReason, SignalingDialog } from '../sip/signaling-driver.ts';
import { callEvents, type CallEndReason, type CallEvent } from './call-events.ts';
import { callMetrics } from './call-metrics.ts';
import type { CallPhaseMachine } from './call-phase.ts';

/** Tool calls still running at hang-up get this long to be admitted before delivery is told the call ended. */
export const TOOL_SETTLE_MS = 2_000;
/** Bounds the BYE at the end of a call ended by callgate (the dialog retransmits within it). */
const HANGUP_TIMEOUT_MS = 5_000;

export interface CallTeardownHost {
  readonly sessionId: string;
  readonly tenantId: string;
  readonly dialog: Pick<SignalingDialog, 'state' | 'hangup'>;
  readonly phase: CallPhaseMachine;
  readonly clock: Clock;
  readonly log: Logger;
  /** When the call was answered (monotonic ms); undefined for a call never answered. */
  answeredAt(): number | undefined;
  /** Stops what the call started: results being spoken fail, the call's signal aborts, a renewal and prompts are dropped. */
  release(): void;
  /** Closes the model session and the media. */
  close(): Promise<unknown>;
  /** Settles once the tool calls in flight have been handled. */
  toolsSettled(): Promise<void>;
  closeRegistryEntry(reason: CallEndReason): Promise<void>;
  /** Tells delivery the call is over (results owed go out of band). */
  handOver(phase: 'hung_up' | 'transferred'): Promise<void>;
  /** How many operations the call owns, for the log line. */
  operations(): number;
  emit(event: CallEvent): void;
}

export class CallTeardown {
  private ended: Promise<void> | undefined;

  constructor(private readonly host: CallTeardownHost) {}

  /** Resolves once the call is over; undefined until an end began. */
  get done(): Promise<void> | undefined {
    return this.ended;
  }

  end(reason: CallEndReason, dialogReason?: DialogEndReason): Promise<void> {
    if (this.ended === undefined) {
      this.host.phase.moveTo('ending', reason);
      // Deferred a tick: the BYE sent by finish() ends the dialog synchronously, and that
      // 'ended' event must find this call already ending with its first reason.
      this.ended = Promise.resolve().then(() => this.finish(reason, dialogReason));
    }
    return this.ended;
  }

  private async finish(
    reason: CallEndReason,
    dialogReason: DialogEndReason | undefined,
  ): Promise<void> {
    const { host } = this;
    if (host.dialog.state !== 'terminated') {
      await Promise.race([
        host.dialog.hangup().catch(() => undefined),
        sleep(host.clock, HANGUP_TIMEOUT_MS),
      ]);
    }
    host.release();
    callMetrics.ended.inc({ tenant: host.tenantId, reason });
    const answeredAt = host.answeredAt();
    if (answeredAt !== undefined) {
      callMetrics.active.dec({ tenant: host.tenantId });
      observeWithExemplar(
        callMetrics.durationSeconds,
        { reason },
        (host.clock.now() - answeredAt) / 1000,
        { session_id: host.sessionId },
      );
    }
    await host.close();
    // A tool call that was being admitted when the caller hung up is owned before delivery looks.
    await Promise.race([host.toolsSettled(), sleep(host.clock, TOOL_SETTLE_MS)]);
    await host
      .closeRegistryEntry(reason)
      .catch((error: unknown) => host.log.warn('session registry close failed', { error }));
    await host
      .handOver(reason === 'transferred' ? 'transferred' : 'hung_up')
      .catch((error: unknown) => host.log.error('out-of-band hand-over failed', { error }));
    host.log.info('call ended', {
      reason,
      dialog_reason: dialogReason,
      operations: host.operations(),
    });
    host.phase.moveTo('ended', reason);
    host.emit(callEvents.ended(reason, dialogReason));
  }
}

/** Why the call ended, from the dialog's reason. */
export function endReasonOf(reason: DialogEndReason): CallEndReason {
  switch (reason) {
    case 'remote-bye':
    case 'cancelled':
      return 'caller_hung_up';
    case 'transferred':
      return 'transferred';
    case 'shutdown':
      return 'shutdown';
    case 'local-bye':
      return 'agent_hung_up';
    case 'rejected':
      return 'rejected';
    case 'ack-timeout':
    case 'request-timeout':
      return 'failed';
  }
}
