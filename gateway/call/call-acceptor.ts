/**
 * Takes inbound calls from the signaling driver and runs one CallSession per call. Each INVITE
 * passes admission first (call-admission.ts): while the gateway drains, while its event loop is
 * late, or at its call limit it gets 503 with Retry-After (a trunk tries another gateway); past
 * its tenant's limit 486. A refused call costs no media port and no model session. At stop the
 * acceptor ends the calls it still holds, each with BYE, their pending results going out of band.
 */
import type { AgentRelease } from '../../agents/agent-versions.ts';
import type { Logger } from '../../config/log.ts';
import { MediaTestEndpoint } from '../media/media-test-endpoint.ts';
import type { InboundCall, SignalingDriver } from '../sip/signaling-driver.ts';
import {
  admitCall,
  refusalHeaders,
  slotsAvailable,
  type AdmissionDecision,
} from './call-admission.ts';
import type { CallEvent } from './call-events.ts';
import { callMetrics } from './call-metrics.ts';
import {
  CallSession,
  DEFAULT_RETRY_AFTER_SECONDS,
  type CallSessionOptions,
} from './call-session.ts';

export type CallAcceptorOptions = Omit<CallSessionOptions, 'call' | 'sessionId'> & {
  /**
   * The agents a call starting now gets (a reload changes them for later calls); `catalogue` when
   * unset.
   */
  readonly agents?: () => AgentRelease;
  /** Aborted when the process starts draining. */
  readonly draining?: AbortSignal;
  /** Sees every event of every call (tests, metrics). */
  readonly onEvent?: (session: CallSession, event: CallEvent) => void;
  /** gateway.maxCalls; calls being set up count. Unset: DEFAULT_MAX_CALLS. */
  readonly maxCalls?: number;
  /** gateway.maxEventLoopDelayMs, compared with `eventLoopDelayMs()`. */
  readonly maxEventLoopDelayMs?: number;
  /** The event loop delay statistic (event-loop-delay.ts); unset, the loop is taken as on time. */
  readonly eventLoopDelayMs?: () => number;
};

/** gateway.maxCalls's default. */
export const DEFAULT_MAX_CALLS = 200;
/** gateway.maxEventLoopDelayMs's default. */
export const DEFAULT_MAX_EVENT_LOOP_DELAY_MS = 250;

export class CallAcceptor {
  private readonly live = new Map<string, CallSession>();
  /** Of the live calls, how many each tenant has. */
  private readonly byTenant = new Map<string, number>();
  private readonly log: Logger;
  readonly maxCalls: number;

  constructor(private readonly options: CallAcceptorOptions) {
    this.log = options.log.child({ component: 'call' });
    this.maxCalls = options.maxCalls ?? DEFAULT_MAX_CALLS;
    callMetrics.slotsAvailable.set(this.maxCalls);
  }

  /** Registers with the driver: every inbound call from here on gets a CallSession. */
  listen(driver: SignalingDriver): void {
    driver.onCall((call) => this.accept(call));
  }

  get active(): ReadonlyMap<string, CallSession> {
    return this.live;
  }

  /** Calls this gateway may still take (gateway.maxCalls minus the calls it holds). */
  get slots(): number {
    return slotsAvailable(this.maxCalls, this.live.size);
  }

  /** What admission decides for this call now. */
  admission(call: Pick<InboundCall, 'tenant'>): AdmissionDecision {
    return admitCall(
      {
        maxCalls: this.maxCalls,
        tenantMaxCalls: call.tenant.maxCalls,
        maxEventLoopDelayMs: this.options.maxEventLoopDelayMs ?? DEFAULT_MAX_EVENT_LOOP_DELAY_MS,
        retryAfterSeconds: this.options.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS,
      },
      {
        gatewayCalls: this.live.size,
        tenantCalls: this.byTenant.get(call.tenant.id) ?? 0,
        eventLoopDelayMs: this.options.eventLoopDelayMs?.() ?? 0,
        draining: this.options.draining?.aborted === true,
      },
    );
  }

  accept(call: InboundCall): void {
    const decision = this.admission(call);
    if (!decision.admit) {
      callMetrics.refused.inc({ reason: decision.reason });
      call.reject(decision.status, decision.phrase, refusalHeaders(decision));
      this.log.debug('call refused', {
        reason: decision.reason,
        status: decision.status,
        sip_call_id: call.callId,
        tenant_id: call.tenant.id,
      });
      return;
    }
    const mediaTest = call.tenant.mediaTest;
    if (mediaTest !== undefined) {
      void MediaTestEndpoint.answer(call, {
        ...this.options.media,
        ...mediaTest,
        logger: this.log,
      });
      return;
    }
    const release = this.options.agents?.();
    const session = new CallSession({
      ...this.options,
      ...(release !== undefined && {
        catalogue: release.catalogue,
        agentVersion: release.version,
      }),
      call,
      log: this.log,
    });
    const onEvent = this.options.onEvent;
    session.on((event) => {
      onEvent?.(session, event);
      if (event.type === 'ended' || event.type === 'rejected') this.release(session, call);
    });
    this.hold(session, call);
    session.start().catch((error: unknown) => {
      this.log.error('call failed to start', { error, session_id: session.sessionId });
      void session.hangup('failed');
    });
  }

  private hold(session: CallSession, call: InboundCall): void {
    this.live.set(session.sessionId, session);
    this.byTenant.set(call.tenant.id, (this.byTenant.get(call.tenant.id) ?? 0) + 1);
    callMetrics.slotsAvailable.set(this.slots);
  }

  private release(session: CallSession, call: InboundCall): void {
    if (!this.live.delete(session.sessionId)) return;
    const left = (this.byTenant.get(call.tenant.id) ?? 1) - 1;
    if (left > 0) this.byTenant.set(call.tenant.id, left);
    else this.byTenant.delete(call.tenant.id);
    callMetrics.slotsAvailable.set(this.slots);
  }

  /** Ends every call still up (BYE, model closed, media released, results out of band). */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.live.values()].map((session) => session.hangup('shutdown')));
  }
}
