/**
 * Takes inbound calls from the signaling driver and runs one CallSession per call. While the
 * gateway drains it refuses new calls with 503 (a trunk tries another gateway); at stop it ends
 * the calls it still holds, each with BYE, their pending results going out of band.
 */
import type { AgentRelease } from '../../agents/agent-versions.ts';
import type { Logger } from '../../config/log.ts';
import { MediaTestEndpoint } from '../media/media-test-endpoint.ts';
import type { InboundCall, SignalingDriver } from '../sip/signaling-driver.ts';
import type { CallEvent } from './call-events.ts';
import { CallSession, type CallSessionOptions } from './call-session.ts';

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
};

export class CallAcceptor {
  private readonly live = new Map<string, CallSession>();
  private readonly log: Logger;

  constructor(private readonly options: CallAcceptorOptions) {
    this.log = options.log.child({ component: 'call' });
  }

  /** Registers with the driver: every inbound call from here on gets a CallSession. */
  listen(driver: SignalingDriver): void {
    driver.onCall((call) => this.accept(call));
  }

  get active(): ReadonlyMap<string, CallSession> {
    return this.live;
  }

  accept(call: InboundCall): void {
    if (this.options.draining?.aborted === true) {
      call.reject(503, 'Service Unavailable');
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
      if (event.type === 'ended' || event.type === 'rejected') this.live.delete(session.sessionId);
    });
    this.live.set(session.sessionId, session);
    session.start().catch((error: unknown) => {
      this.log.error('call failed to start', { error, session_id: session.sessionId });
      void session.hangup('failed');
    });
  }

  /** Ends every call still up (BYE, model closed, media released, results out of band). */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.live.values()].map((session) => session.hangup('shutdown')));
  }
}
