/**
 * The call's link to the realtime model: the session serving the call, opening it, re-opening it
 * once after a loss (with the call's summary), and renewing it before the provider's session limit
 * at a quiet moment. Every change of the link is a phase change of the call (call-phase.ts).
 * Events of a session that no longer serves the call are ignored: each session is a generation.
 */
import type { Clock, ClockHandle } from '../../config/clock.ts';
import type { Logger } from '../../config/log.ts';
import { observeWithExemplar } from '../../config/metrics.ts';
import type { AgentSession } from '../../agents/agent-session.ts';
import type { SessionOptions } from '../realtime/realtime-model.ts';
import type {
  PlaybackPosition,
  RealtimeEvent,
  RealtimeSession,
  ResponseRequest,
  SessionConfig,
} from '../realtime/realtime-session.ts';
import { callEvents, type CallEvent } from './call-events.ts';
import { callMetrics } from './call-metrics.ts';
import {
  isEnding,
  isLeaving,
  isLinkUp,
  isOpeningLink,
  linkUpPhase,
  type CallPhaseMachine,
} from './call-phase.ts';
import type { CallPromptKind } from './call-prompts.ts';

/** A lost model session is re-opened this many times in one call; then the call ends politely. */
export const MAX_MODEL_REOPENS = 1;
/**
 * A session about to expire is renewed at a quiet moment; when none comes, this long before the
 * provider's limit it is renewed anyway (an interruption now beats being cut off at the limit).
 * Below SESSION_EXPIRY_WARNING_MS (5 min) in the realtime client, or renewal would never wait.
 */
export const FORCED_RENEWAL_BEFORE_LIMIT_MS = 30_000;

export interface ModelLinkHost {
  readonly model: { openSession(options: SessionOptions): RealtimeSession };
  readonly agent: AgentSession;
  readonly phase: CallPhaseMachine;
  readonly clock: Clock;
  readonly log: Logger;
  readonly signal: AbortSignal;
  readonly playback: PlaybackPosition;
  /** The realtime model of the call (its entry agent's or its tenant's); unset, the configured default. */
  readonly realtimeModel?: string;
  /** What the entry agent says first; unset, the model opens the conversation. */
  readonly greeting?: string;
  /** An event of the session serving the call. */
  onEvent(event: RealtimeEvent): void;
  sessionConfig(agentName: string, context?: string): SessionConfig;
  /** What a re-opened or renewed session is told about the call so far. */
  reopenContext(): Promise<string>;
  /** The caller holds the call (the last SDP's direction). */
  callerHolds(): boolean;
  /** Nobody is speaking and nothing is owed to the session in use (see README, renewal). */
  quiet(): boolean;
  /** The session in use is over: what it was saying stops; returns how many results were cut. */
  leaveSession(): number;
  /** Offers held results again shortly, when the line is still quiet then. */
  offerAgainSoon(): void;
  playPrompt(kind: CallPromptKind): Promise<void>;
  /** The model cannot be had again: goodbye prompt, then the end. */
  sayGoodbye(): void;
  /** A re-opened session serves the call: delivery may speak what waited. */
  reopened(): void;
  /** When the INVITE arrived (monotonic ms, the clock's), for the model-ready metric. */
  readonly receivedAt: number;
  emit(event: CallEvent): void;
}

/**
 * The response that speaks a configured greeting: a real model follows the instruction, and the
 * simulator says the quoted line (test/unit/call/call-greeting.test.ts).
 */
export function greetingResponse(greeting: string): ResponseRequest {
  return {
    instructions: `Greet the caller with exactly these words, and nothing else: "${greeting}"`,
  };
}

interface Renewal {
  /** Monotonic ms after which the switch no longer waits for a quiet moment. */
  readonly forceAt: number;
  readonly timer: ClockHandle;
  standby?: Promise<RealtimeSession | undefined>;
}

export class ModelLink {
  private current: RealtimeSession | undefined;
  /** Bumped per model session; events of an older session are ignored. */
  private generation = 0;
  private reopens = 0;
  private readyPromise: Promise<boolean> = Promise.resolve(false);
  /** Settles `ready` for the first session, at the answer (`begin`) or when it failed. */
  private resolveFirst: ((ok: boolean) => void) | undefined;
  /** The first session was lost after it was configured, while the call still rang. */
  private lostBeforeAnswer = false;
  /** The provider's session limit is near: renew at the next quiet moment. */
  private renewal: Renewal | undefined;

  constructor(private readonly host: ModelLinkHost) {}

  /** The session serving the call now. */
  get session(): RealtimeSession | undefined {
    return this.current;
  }

  /** Resolves once a session serves the call (false: it could not be opened). */
  get ready(): Promise<boolean> {
    return this.readyPromise;
  }

  get renewalPending(): boolean {
    return this.renewal !== undefined;
  }

  /**
   * Connects and configures the first session while the call rings (`opening_model`); resolves
   * false when it cannot be opened, or was lost before the answer. The conversation begins with
   * `begin()` once the call is answered: nothing is said to a caller who has not been answered.
   */
  async openFirst(): Promise<boolean> {
    let ready: (ok: boolean) => void = () => undefined;
    this.readyPromise = new Promise((resolve) => (ready = resolve));
    this.resolveFirst = ready;
    const opened = await this.connect(false);
    if (!opened || this.lostBeforeAnswer) {
      this.resolveFirst = undefined;
      ready(false);
      if (opened) await this.current?.close().catch(() => undefined);
      return false;
    }
    return true;
  }

  /** The first session was lost while the call rang: the call must not be answered. */
  get lostWhileRinging(): boolean {
    return this.lostBeforeAnswer;
  }

  /** The call was answered with the first session open: the model serves it, and greets the caller. */
  begin(): void {
    const resolve = this.resolveFirst;
    this.resolveFirst = undefined;
    const session = this.current;
    if (resolve === undefined || session === undefined) return;
    this.serve(session, false);
    resolve(true);
  }

  /** Opens, connects and configures a re-opened session with a summary of the call so far. */
  private async open(): Promise<boolean> {
    if (!(await this.connect(true))) return false;
    const session = this.current;
    if (session === undefined || isEnding(this.host.phase.phase)) return false;
    this.serve(session, true);
    return true;
  }

  /** Opens a model session and makes it the call's; resolves once it is connected and configured. */
  private async connect(reopen: boolean): Promise<boolean> {
    const { host } = this;
    const generation = ++this.generation;
    const session = host.model.openSession({
      playback: host.playback,
      signal: host.signal,
      logger: host.log,
      ...(host.realtimeModel !== undefined && { model: host.realtimeModel }),
    });
    this.current = session;
    session.onAny((event) => {
      if (generation === this.generation) host.onEvent(event);
    });
    try {
      await session.connect();
      const context = reopen ? await host.reopenContext() : undefined;
      await session.configure(host.sessionConfig(host.agent.activeAgent, context));
    } catch (error) {
      host.log.warn('model session could not be opened', { error, reopen });
      await session.close().catch(() => undefined);
      return false;
    }
    if (isEnding(host.phase.phase)) return false;
    if (!reopen)
      observeWithExemplar(
        callMetrics.modelReadySeconds,
        { tenant: host.agent.tenantId },
        Math.max(0, host.clock.now() - host.receivedAt) / 1000,
        { session_id: host.agent.sessionId },
      );
    return true;
  }

  /** The opened session serves the call: the phase says so, and the model speaks first. */
  private serve(session: RealtimeSession, reopen: boolean): void {
    const { host } = this;
    host.phase.moveTo(
      linkUpPhase({ callerHolds: host.callerHolds(), renewalPending: this.renewalPending }),
      reopen ? 'model_reopened' : 'model_ready',
    );
    host.emit(callEvents.modelReady(this.generation, host.agent.activeAgent));
    if (reopen) {
      // The caller already heard the apology prompt; a real model reads this as an instruction, the simulator speaks it.
      session.addSystemMessage('I am back with you.');
    }
    // A greeting is the call's first words, once: a re-opened session goes on where the call was.
    if (!reopen && host.greeting !== undefined)
      session.createResponse(greetingResponse(host.greeting));
    else session.createResponse();
    if (reopen) host.reopened();
  }

  /**
   * A lost model session: the caller hears the apology prompt at once (nothing else can speak),
   * and a new session is opened with the call's summary while it plays. A second loss, or a
   * re-open that fails, ends the call with the goodbye prompt; pending results go out of band.
   */
  onDisconnected(event: Extract<RealtimeEvent, { type: 'disconnected' }>): void {
    const { host } = this;
    const phase = host.phase.phase;
    if (isLeaving(phase) || event.reason === 'closed' || event.reason === 'aborted') return;
    if (isOpeningLink(phase)) {
      // The session's connect or configure fails with this loss, and whoever opened it decides:
      // start() refuses the call, a re-open says goodbye. Re-opening here too would do both
      // (test/scenarios/model-lost-while-opening.test.ts). A first session lost once configured,
      // while the call still rings, refuses the call the same way.
      if (phase === 'opening_model') this.lostBeforeAnswer = true;
      host.emit(callEvents.modelDisconnected(event.reason, event.detail, false));
      host.log.warn('model session lost while it was being opened', {
        reason: event.reason,
        detail: event.detail,
      });
      return;
    }
    const planned = event.reason === 'session_limit';
    const willReopen = planned || this.reopens < MAX_MODEL_REOPENS;
    host.emit(callEvents.modelDisconnected(event.reason, event.detail, willReopen));
    host.log.warn('model session lost', {
      reason: event.reason,
      detail: event.detail,
      reopen: willReopen,
    });
    // A renewal in progress is moot: the re-open below carries the same summary.
    this.cancelRenewal();
    // Responses of the lost session never finish: what was being said is said again later.
    host.leaveSession();
    if (!willReopen) {
      host.sayGoodbye();
      return;
    }
    if (!planned) this.reopens++;
    host.phase.moveTo('reopening', planned ? 'model_session_limit' : 'model_lost');
    void host.playPrompt('reconnecting');
    const cause = planned ? 'expiring' : 'lost';
    this.readyPromise = this.open();
    void this.readyPromise.then((ok) => {
      callMetrics.modelReopens.inc({ cause, outcome: ok ? 'ok' : 'failed' });
      if (!ok && !isEnding(host.phase.phase)) host.sayGoodbye();
    });
  }

  /**
   * The provider's session limit is near. Rather than be cut off mid-sentence at the limit, the
   * call opens a new session with the same summary a re-open gets, and switches to it when
   * nobody is speaking and nothing is owed to the old one (no response, delivery or tool turn).
   */
  onExpiring(remainingMs: number): void {
    const { host } = this;
    if (isEnding(host.phase.phase) || this.renewal !== undefined) return;
    // Short limits (tests, small providers) still leave half the warning to find a quiet moment.
    const forceInMs = Math.max(remainingMs - FORCED_RENEWAL_BEFORE_LIMIT_MS, remainingMs / 2);
    const timer = host.clock.schedule(() => this.renewIfQuiet(true), forceInMs);
    this.renewal = { forceAt: host.clock.now() + forceInMs, timer };
    if (isLinkUp(host.phase.phase))
      host.phase.moveTo(
        linkUpPhase({ callerHolds: host.callerHolds(), renewalPending: true }),
        'model_expiring',
      );
    host.emit(callEvents.modelExpiring(remainingMs));
    host.log.info('model session expiring; renewing at the next quiet moment', {
      remaining_ms: remainingMs,
    });
    this.renewIfQuiet(false);
  }

  /** Switches to a standby session if a renewal is due and the line is quiet (or `force`). */
  renewIfQuiet(force: boolean): void {
    const { host } = this;
    const renewal = this.renewal;
    if (renewal === undefined || isEnding(host.phase.phase) || (!force && !host.quiet())) return;
    // The new session is connected and configured while the old one still serves the caller.
    renewal.standby ??= this.openStandby();
    const pending = renewal.standby;
    void pending.then((standby) => {
      // A standby lost before the switch is forgotten; the next quiet moment opens another.
      if (standby === undefined || this.renewal !== renewal || renewal.standby !== pending) return;
      if (isEnding(host.phase.phase)) {
        void standby.close().catch(() => undefined);
        return;
      }
      // Quiet may have ended while the standby connected: wait for the next one (or the deadline).
      if (!host.quiet() && host.clock.now() < renewal.forceAt) return;
      this.switchTo(standby);
    });
  }

  /** Drops a renewal in progress (the session was lost, or the call ends). */
  cancelRenewal(): void {
    const renewal = this.renewal;
    if (renewal === undefined) return;
    this.host.clock.cancel(renewal.timer);
    void renewal.standby?.then((standby) => standby?.close());
    this.renewal = undefined;
  }

  /** Closes the session in use (the call ends, or is refused while it rang). */
  async close(): Promise<void> {
    this.resolveFirst?.(false);
    this.resolveFirst = undefined;
    await this.current?.close();
  }

  private async openStandby(): Promise<RealtimeSession | undefined> {
    const { host } = this;
    const session = host.model.openSession({
      playback: host.playback,
      signal: host.signal,
      logger: host.log,
      ...(host.realtimeModel !== undefined && { model: host.realtimeModel }),
    });
    session.onAny((event) => {
      if (session === this.current) host.onEvent(event);
      else if (event.type === 'disconnected' && this.renewal !== undefined)
        this.renewal.standby = undefined;
    });
    try {
      await session.connect();
      await session.configure(
        host.sessionConfig(host.agent.activeAgent, await host.reopenContext()),
      );
      return session;
    } catch (error) {
      // The old session serves on; its hard limit ends in a re-open.
      host.log.warn('renewing the model session failed', { error });
      callMetrics.modelReopens.inc({ cause: 'expiring', outcome: 'failed' });
      await session.close().catch(() => undefined);
      return undefined;
    }
  }

  private switchTo(session: RealtimeSession): void {
    const { host } = this;
    const renewal = this.renewal;
    if (renewal !== undefined) host.clock.cancel(renewal.timer);
    this.renewal = undefined;
    const old = this.current;
    // Events of the old session are ignored from here on: its generation is over.
    const generation = ++this.generation;
    this.current = session;
    // A forced switch may cut the old session mid-sentence: nothing of it plays on, and a result it
    // was speaking is said again on the new one (test/unit/call/renewal-during-playout.test.ts).
    const cut = host.leaveSession();
    void old
      ?.close()
      .catch((error: unknown) =>
        host.log.debug('closing the expiring model session failed', { error }),
      );
    callMetrics.modelReopens.inc({ cause: 'expiring', outcome: 'ok' });
    this.readyPromise = Promise.resolve(true);
    if (isLinkUp(host.phase.phase))
      host.phase.moveTo(
        linkUpPhase({ callerHolds: host.callerHolds(), renewalPending: false }),
        'model_renewed',
      );
    host.emit(callEvents.modelRenewed(generation, host.agent.activeAgent));
    host.log.info('model session renewed before its limit', {
      attempt: generation,
      results_cut: cut,
    });
    if (cut > 0) host.offerAgainSoon();
  }
}
