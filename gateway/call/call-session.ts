/**
 * One call, end to end: the SIP dialog, its RTP session, its realtime model session and its agent
 * session. Caller audio goes to the model, model audio is paced back to the caller, DTMF reaches
 * the model as events, function calls run through the tool runtime, and results come back through
 * result delivery (the ConversationPort below). See README.md in this folder for the sequence.
 *
 * The call's parts live beside it: its lifecycle (call-phase.ts), the model link with open,
 * re-open and renewal (model-link.ts), the audio uplink (audio-uplink.ts), the delivery port
 * (delivery-port.ts) and the teardown (call-teardown.ts). This class joins them and handles the
 * dialog's, the media's and the model's events.
 *
 * The call never decides what happened to an operation: barge-in, hang-up, transfer and a lost
 * model change what is said and where, never the ledger.
 */
import { ulid } from 'ulid';
import { sleep, systemClock, type Clock, type ClockHandle } from '../../config/clock.ts';
import { isCallgateError } from '../../config/errors.ts';
import type { Logger } from '../../config/log.ts';
import { observeWithExemplar } from '../../config/metrics.ts';
import type { RtpConfig } from '../../config/schema.ts';
import type { AgentCatalogue, ToolOutput } from '../../agents/agent.ts';
import { AgentSession } from '../../agents/agent-session.ts';
import type { ResultDelivery } from '../../agents/result-delivery.ts';
import { toolError, type CallControl, type ToolRuntime } from '../../agents/tool-runtime.ts';
import type { OperationLedger } from '../../jobs/ledger/operation-ledger.ts';
import type { ModelAudioFormat } from '../media/audio-format.ts';
import { wireCodec } from '../media/audio-format.ts';
import type { MediaTimer } from '../media/media-timer.ts';
import type { PlayoutClearResult } from '../media/playout.ts';
import type { PlayoutScheduler } from '../media/playout-scheduler.ts';
import type { RtpPortAllocator } from '../media/rtp-port-allocator.ts';
import { RtpSession, type RtpSessionOptions } from '../media/rtp-session.ts';
import type { RtpSessionEvent } from '../media/rtp-session-events.ts';
import type { DtmfDigit } from '../media/telephone-event.ts';
import type { SessionOptions } from '../realtime/realtime-model.ts';
import type {
  AudioFormat,
  PlaybackPosition,
  RealtimeEvent,
  RealtimeSession,
  ResponseHandle,
  SessionConfig,
} from '../realtime/realtime-session.ts';
import { bytesPerMs } from '../realtime/realtime-session.ts';
import type { SipHeader } from '../sip/message-types.ts';
import { answerOffer, type NegotiatedMedia } from '../sip/sdp-negotiation.ts';
import { warningValue } from '../sip/message-factory.ts';
import { SRTP_REQUIRED_WARNING } from '../sip/sdp-srtp.ts';
import { srtpUnavailableReason } from '../media/srtp-transform.ts';
import type { DialogEndReason, DialogEvent, InboundCall } from '../sip/signaling-driver.ts';
import { AudioUplink } from './audio-uplink.ts';
import { refusalHeaders, unavailable } from './call-admission.ts';
import { callEvents, type CallEndReason, type CallEvent } from './call-events.ts';
import { callMetrics } from './call-metrics.ts';
import {
  CallPhaseMachine,
  callerOnHold,
  isEnding,
  isLeaving,
  type CallPhase,
} from './call-phase.ts';
import type { CallPromptKind, CallPrompts } from './call-prompts.ts';
import type { CallRegistry } from './call-registry.ts';
import { CallTeardown, endReasonOf } from './call-teardown.ts';
import { DeliveryPort } from './delivery-port.ts';
import { ModelLink } from './model-link.ts';

// Kept where it was before the call was split (test/e2e/call-model-audio-batches.test.ts).
export { MODEL_AUDIO_BATCH_MS } from './audio-uplink.ts';

/**
 * After the model gave up a result's response, or a renewal cut one short, how soon a quiet call
 * is offered it again (nothing else would: the line is silent and no model event is coming).
 */
const RETRY_AFTER_DROP_MS = 1_000;
/**
 * The goodbye prompt may hold the BYE this much longer than its own length (pacing, a busy
 * scheduler). Far below HANGUP_TIMEOUT_MS (call-teardown.ts) in effect: the caller is not kept on a
 * dead line.
 */
const PROMPT_SLACK_MS = 1_500;
/**
 * After the caller's turn ends (speech stopped, a key pressed) the model owes an answer; a switch
 * in between would lose the turn. A response that has not started this long after is not coming.
 */
const TURN_ANSWER_WAIT_MS = 3_000;

/**
 * How long a call may ring while its media and model session are opened (gateway.setupTimeoutMs's
 * default): a realtime session connects and is configured in well under a second on a healthy
 * link, and a caller who hears ringing for more than a few seconds hangs up.
 */
export const DEFAULT_SETUP_TIMEOUT_MS = 5_000;
/** gateway.retryAfterSeconds's default. */
export const DEFAULT_RETRY_AFTER_SECONDS = 5;

/** How the setup while the call rang came out: ready to answer, refused already, or to be refused. */
type SetupOutcome = 'ready' | 'refused' | 'setup_failed' | 'setup_timeout';

/** What the call uses of its RTP session (a port, so unit tests can drive a call without sockets). */
export type CallRtp = Pick<
  RtpSession,
  | 'localAddress'
  | 'localPort'
  | 'on'
  | 'setRemote'
  | 'setSending'
  | 'setHold'
  | 'setCodec'
  | 'setSrtp'
  | 'play'
  | 'endItem'
  | 'clear'
  | 'playedMs'
  | 'injectDigit'
  | 'close'
>;

export interface CallMedia {
  readonly config: RtpConfig;
  readonly ports: RtpPortAllocator;
  readonly scheduler: PlayoutScheduler;
  readonly timer: MediaTimer;
  /** Opens the call's RTP session; `RtpSession.open` unless a test drives the media itself. */
  readonly open?: (options: RtpSessionOptions) => Promise<CallRtp>;
}

export interface CallSessionOptions {
  readonly call: InboundCall;
  readonly media: CallMedia;
  /** Opens model sessions (RealtimeModel). */
  readonly model: ModelPort;
  /** The agents of this call, kept to its end. */
  readonly catalogue: AgentCatalogue;
  /** Their release, recorded on the call and its operations (agents/agent-versions.ts). */
  readonly agentVersion?: string;
  readonly runtime: Pick<
    ToolRuntime,
    'handle' | 'toolsFor' | 'inlineAnswer' | 'settleInlineAnswer'
  >;
  readonly delivery: Pick<ResultDelivery, 'attach' | 'onIdle' | 'onCallEnded'>;
  readonly ledger: Pick<OperationLedger, 'get'>;
  readonly registry: Pick<CallRegistry, 'open' | 'close' | 'appendEvent'>;
  readonly gatewayId: string;
  readonly log: Logger;
  readonly sessionId?: string;
  /** The apology and goodbye lines; without them the caller hears nothing while the model is re-opened. */
  readonly prompts?: Pick<CallPrompts, 'get'>;
  /** The call's clock and timers; the process's own by default. */
  readonly clock?: Clock;
  /** gateway.setupTimeoutMs: how long the call rings at most while media and model open. */
  readonly setupTimeoutMs?: number;
  /** gateway.retryAfterSeconds: sent with a 503 when the setup fails. */
  readonly retryAfterSeconds?: number;
}

type Listener = (event: CallEvent) => void;

/** What the call uses of the realtime model: one session per open (RealtimeModel implements it). */
export interface ModelPort {
  openSession(options: SessionOptions): RealtimeSession;
}

/** The model audio format for a wire codec: G.711 passes through untouched, Opus goes via 24 kHz PCM. */
function modelFormats(codec: NegotiatedMedia['codec']): {
  model: ModelAudioFormat;
  realtime: AudioFormat;
} {
  if (codec === 'PCMU') return { model: { encoding: 'pcmu' }, realtime: 'pcmu' };
  if (codec === 'PCMA') return { model: { encoding: 'pcma' }, realtime: 'pcma' };
  return { model: { encoding: 'pcm16', sampleRate: 24000 }, realtime: 'pcm24k' };
}

export class CallSession {
  readonly sessionId: string;
  readonly agent: AgentSession;
  private readonly options: CallSessionOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly listeners = new Set<Listener>();
  private readonly abort = new AbortController();
  private readonly lifecycle: CallPhaseMachine;
  private readonly link: ModelLink;
  private readonly uplink: AudioUplink;
  private readonly deliveries: DeliveryPort;
  private readonly teardown: CallTeardown;
  private rtp: CallRtp | undefined;
  /** Unsubscribes from the dialog's events (a call refused while it rang stops hearing them). */
  private stopDialogEvents: (() => void) | undefined;
  /** The call has a registry record (from the answer on): its events go to its timeline. */
  private recorded = false;
  private modelFormat: AudioFormat = 'pcmu';
  /** The codec on the wire now (the answer's, then each re-INVITE's). */
  private wireCodec:
    { readonly codec: NegotiatedMedia['codec']; readonly payloadType: number } | undefined;
  /** The last SDP's direction says the caller holds the call; the phase takes it up (call-phase.ts). */
  private callerHolds = false;
  /** Responses the caller talked over: their late audio is not played. */
  private readonly silenced = new Set<string>();
  /**
   * Responses created while the caller was talking (the client cancels them once created): none of
   * their audio is played, and their items are cut at 0 ms when they are done, so the model does
   * not take what it generated for something the caller heard.
   */
  private readonly unheard = new Map<string, Set<string>>();
  /** Items each response played, to end them in the playout when the response is done. */
  private readonly itemsByResponse = new Map<string, Set<string>>();
  private toolChain: Promise<void> = Promise.resolve();
  /** Monotonic ms at the answer, for the duration metric; undefined until answered. */
  private answeredAt: number | undefined;
  /** Items handed to the playout and not yet played out or cleared. */
  private readonly playing = new Set<string>();
  /** Prompts waiting for their last frame to go out. */
  private readonly promptWaiters = new Map<string, () => void>();
  private promptCount = 0;
  private toolsRunning = 0;
  /** When the caller's last turn ended and no response has started since (undefined: none owed). */
  private answerOwedSince: number | undefined;
  /** The response whose response_done is being handled: the model still names it active meanwhile. */
  private endingResponseId: string | undefined;

  constructor(options: CallSessionOptions) {
    this.options = options;
    this.sessionId = options.sessionId ?? `call_${ulid()}`;
    this.clock = options.clock ?? systemClock;
    const { call } = options;
    this.log = options.log.child({
      session_id: this.sessionId,
      sip_call_id: call.callId,
      tenant_id: call.tenant.id,
    });
    this.agent = new AgentSession({
      sessionId: this.sessionId,
      tenantId: call.tenant.id,
      caller: call.identity.caller,
      callerVerified: call.identity.verified,
      called: call.calledNumber,
      ownerGateway: options.gatewayId,
      agent: call.agent,
      catalogue: options.catalogue,
      ...(options.agentVersion !== undefined && { agentVersion: options.agentVersion }),
      callerOnHold: () => callerOnHold(this.lifecycle.phase, this.callerHolds),
      responseActive: () => this.modelResponding(),
    });
    this.lifecycle = new CallPhaseMachine({
      onChange: ({ from, to, cause }) => this.emit(callEvents.phaseChanged(from, to, cause)),
      // The call stays where it is: every phase can still end, so the caller is never stranded.
      onRefused: ({ from, to, cause }) =>
        this.log.error('call phase change refused', { from, to, cause }),
    });
    const entry = options.catalogue.get(call.agent);
    const realtimeModel = entry?.model ?? call.tenant.model;
    this.link = new ModelLink({
      model: options.model,
      ...(realtimeModel !== undefined && { realtimeModel }),
      ...(entry?.greeting !== undefined && { greeting: entry.greeting }),
      agent: this.agent,
      phase: this.lifecycle,
      clock: this.clock,
      log: this.log,
      signal: this.abort.signal,
      playback: this.playback(),
      onEvent: (event) => this.onModel(event),
      sessionConfig: (agentName, context) => this.sessionConfig(agentName, context),
      reopenContext: () => this.reopenContext(),
      callerHolds: () => this.callerHolds,
      quiet: () => this.quiet,
      leaveSession: () => this.leaveModelSession(),
      offerAgainSoon: () => this.offerAgainSoon(),
      playPrompt: (kind) => this.playPrompt(kind),
      sayGoodbye: () => void this.endWithGoodbye(),
      reopened: () =>
        void this.options.delivery
          .onIdle(this.sessionId)
          .catch((error: unknown) => this.log.warn('delivery after re-open failed', { error })),
      receivedAt: call.receivedAt,
      emit: (event) => this.emit(event),
    });
    this.uplink = new AudioUplink((audio) => this.link.session?.sendAudio(audio));
    this.deliveries = new DeliveryPort({
      clock: this.clock,
      modelReady: () => this.link.ready,
      model: () => this.link.session,
      ending: () => isEnding(this.lifecycle.phase),
      callerOnHold: () => this.agent.callerOnHold,
      playedMs: (itemId) => this.rtp?.playedMs(itemId),
      cut: (responseId) => {
        if (responseId !== undefined) this.silenced.add(responseId);
        this.clearPlayout();
      },
      settled: (operationId, outcome) => {
        this.emit(callEvents.resultSpoken(operationId, outcome.status, outcome.responseId));
        // Settled by its playout after the response was done: the line may be quiet now.
        if (!this.agent.callerSpeaking && !this.agent.responseActive) this.link.renewIfQuiet(false);
      },
      offerAgainSoon: () => this.offerAgainSoon(),
    });
    this.teardown = new CallTeardown({
      sessionId: this.sessionId,
      tenantId: call.tenant.id,
      dialog: call.dialog,
      phase: this.lifecycle,
      clock: this.clock,
      log: this.log,
      answeredAt: () => this.answeredAt,
      release: () => this.release(),
      close: () => Promise.allSettled([this.link.close(), this.rtp?.close()]),
      toolsSettled: () => this.toolChain,
      // A call refused or cancelled while it rang never had a record.
      closeRegistryEntry: (reason) =>
        this.recorded ? this.options.registry.close(this.sessionId, reason) : Promise.resolve(),
      handOver: (phase) => this.options.delivery.onCallEnded(this.sessionId, phase),
      operations: () => this.agent.operations.size,
      emit: (event) => this.emit(event),
    });
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves when the call has ended (or was rejected) and everything it held is released. */
  get done(): Promise<void> {
    return (
      this.teardown.done ??
      new Promise((resolve) =>
        this.on((event) => (event.type === 'ended' || event.type === 'rejected') && resolve()),
      )
    );
  }

  /** Where the call is in its lifecycle (call-phase.ts). */
  get phase(): CallPhase {
    return this.lifecycle.phase;
  }

  get rtpSession(): CallRtp | undefined {
    return this.rtp;
  }

  /**
   * Sets the call up while it rings and answers it only once its agent can speak: 180, the media
   * ports, then the first model session (connected and configured), all within the setup time;
   * then 200, and the greeting. A setup that fails or runs out of time is refused with 503 and
   * Retry-After, never answered and then dropped; a CANCEL meanwhile closes what was opened
   * (test/unit/call/call-setup.test.ts). Returns false when the call was not answered (refused:
   * no common codec, no media ports, unknown agent, no model; or cancelled while it rang).
   */
  async start(): Promise<boolean> {
    const { call, catalogue } = this.options;
    if (catalogue.get(call.agent) === undefined) return this.reject(500, 'Agent Not Configured');
    const offer = call.offer;
    // The codec is known before any port is taken; the real answer is built by accept().
    const probe =
      offer === undefined
        ? undefined
        : answerOffer(offer, {
            preference: call.tenant.codecs,
            local: { address: this.options.media.config.listen, port: 9 },
            sessionId: '0',
            sessionVersion: 0,
            srtp: call.tenant.srtp,
          });
    if (probe !== undefined && !probe.ok)
      return this.reject(
        488,
        'Not Acceptable Here',
        probe.reason === 'srtp-required' ? warningHeaders(SRTP_REQUIRED_WARNING) : [],
      );
    const needsSrtp =
      probe !== undefined ? probe.media.srtp !== undefined : call.tenant.srtp === 'required';
    const noSrtp = needsSrtp ? srtpUnavailableReason() : undefined;
    if (noSrtp !== undefined) {
      this.log.error('SRTP is not available on this gateway, call refused', { reason: noSrtp });
      return this.reject(488, 'Not Acceptable Here', warningHeaders('SRTP unavailable'));
    }
    call.ring();
    const setup = await this.withinSetupTime(this.openWhileRinging(probe?.media));
    if (setup !== 'ready') {
      if (setup === 'refused' || isEnding(this.lifecycle.phase)) return false;
      return this.refuseSetup(setup);
    }
    return this.answer();
  }

  /** Ends the call from callgate's side (shutdown, operator); the BYE goes out first. */
  hangup(reason: CallEndReason = 'agent_hung_up'): Promise<void> {
    return this.end(reason);
  }

  // ---- the setup while the call rings ----------------------------------------------------------

  /**
   * Resolves with what `setup` resolved, or `setup_timeout` once gateway.setupTimeoutMs passed.
   * A setup that loses the race goes on in the background and closes what it opens, because the
   * call is no longer in `opening_model` (see `openWhileRinging`).
   */
  private async withinSetupTime(setup: Promise<SetupOutcome>): Promise<SetupOutcome> {
    let timer: ClockHandle | undefined;
    const expired = new Promise<SetupOutcome>((resolve) => {
      timer = this.clock.schedule(
        () => resolve('setup_timeout'),
        this.options.setupTimeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS,
      );
    });
    try {
      return await Promise.race([setup, expired]);
    } finally {
      if (timer !== undefined) this.clock.cancel(timer);
    }
  }

  /** Opens the media ports, then the first model session; `ready` when the call can be answered. */
  private async openWhileRinging(media: NegotiatedMedia | undefined): Promise<SetupOutcome> {
    const codecName = media?.codec ?? 'PCMU';
    const formats = modelFormats(codecName);
    this.modelFormat = formats.realtime;
    const options = this.options.media;
    const openMedia = options.open ?? ((o: RtpSessionOptions) => RtpSession.open(o));
    let rtp: CallRtp;
    try {
      rtp = await openMedia({
        config: options.config,
        ports: options.ports,
        scheduler: options.scheduler,
        timer: options.timer,
        codec: wireCodec(codecName, media?.payloadType),
        ...(media?.telephoneEvent !== undefined && {
          telephoneEventPayloadType: media.telephoneEvent.payloadType,
        }),
        model: formats.model,
        ...(media !== undefined && { remote: media.remote }),
        // Only these and the SDP's address may send the call's media (media-source-policy.ts).
        sources: {
          signaling: this.options.call.source.address,
          allowFrom: this.options.call.tenant.media.allowFrom,
        },
        logger: this.log,
        cname: this.sessionId,
      });
    } catch (error) {
      if (this.lifecycle.phase !== 'opening_model') return 'refused';
      if (isCallgateError(error, 'CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED'))
        this.reject(503, 'Service Unavailable', this.retryAfter());
      else {
        this.log.error('media could not be opened', { error });
        this.reject(500, 'Server Internal Error');
      }
      return 'refused';
    }
    // Refused (out of time) or cancelled while the ports were taken: they go back at once.
    if (this.lifecycle.phase !== 'opening_model') {
      await rtp.close();
      return 'refused';
    }
    this.rtp = rtp;
    // From here a CANCEL ends the call through the teardown, which closes the model and the media.
    this.stopDialogEvents = this.options.call.dialog.on((event) => this.onDialog(event));
    const opened = await this.link.openFirst();
    if (this.lifecycle.phase !== 'opening_model') return 'refused';
    return opened ? 'ready' : 'setup_failed';
  }

  /**
   * The setup failed or ran out of time while the call rang: 503 with Retry-After (a carrier tries
   * another gateway), then the model session and the media ports are closed.
   */
  private async refuseSetup(reason: 'setup_failed' | 'setup_timeout'): Promise<false> {
    this.stopDialogEvents?.();
    callMetrics.refused.inc({ reason });
    this.log.warn(
      reason === 'setup_timeout'
        ? 'the call was not set up in time; refused'
        : 'the model session could not be opened; the call is refused',
      { setup_timeout_ms: this.options.setupTimeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS },
    );
    const done = this.reject(503, 'Service Unavailable', this.retryAfter());
    this.release();
    await Promise.allSettled([this.link.close(), this.rtp?.close()]);
    return done;
  }

  /** The model can speak: 200, the media follows the answer, and the conversation begins. */
  private answer(): boolean {
    const { call } = this.options;
    const rtp = this.rtp;
    if (rtp === undefined) return false;
    if (this.link.lostWhileRinging) {
      void this.refuseSetup('setup_failed');
      return false;
    }
    this.lifecycle.moveTo('answering', 'model_ready');
    const accepted = call.accept({ local: { address: rtp.localAddress, port: rtp.localPort } });
    // A refused answer ended the dialog, and with it the call (its teardown closes what it held).
    if (!accepted.ok) return false;
    rtp.setRemote(accepted.media.remote);
    rtp.setSrtp(accepted.media.srtp);
    applyDirection(rtp, accepted.media);
    this.applyHold(accepted.media);
    this.wireCodec = { codec: accepted.media.codec, payloadType: accepted.media.payloadType };
    rtp.on((event) => this.onMedia(event));
    this.options.delivery.attach(this.agent, this.deliveries.port());
    // Issued before any event of the call is appended, on the same connection: the record comes first.
    this.recorded = true;
    void this.options.registry
      .open({
        sessionId: this.sessionId,
        tenantId: call.tenant.id,
        sipCallId: call.callId,
        caller: call.identity.caller,
        calledNumber: call.calledNumber,
        agent: call.agent,
        ...(this.options.agentVersion !== undefined && {
          agentVersion: this.options.agentVersion,
        }),
        startedAt: this.clock.epochMs(),
      })
      .catch((error: unknown) => this.log.warn('session registry entry failed', { error }));
    this.answeredAt = this.clock.now();
    observeWithExemplar(
      callMetrics.setupSeconds,
      { tenant: call.tenant.id },
      Math.max(0, this.answeredAt - call.receivedAt) / 1000,
      { session_id: this.sessionId },
    );
    callMetrics.active.inc({ tenant: call.tenant.id });
    this.emit(
      callEvents.answered(
        accepted.media.codec,
        accepted.media.codec === 'PCMU' || accepted.media.codec === 'PCMA',
        rtp.localPort,
      ),
    );
    this.log.info('call answered', {
      codec: accepted.media.codec,
      rtp_port: rtp.localPort,
      agent: call.agent,
    });
    this.link.begin();
    return true;
  }

  private retryAfter(): readonly SipHeader[] {
    return refusalHeaders(
      unavailable('setup_failed', this.options.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS),
    );
  }

  // ---- the model -----------------------------------------------------------------------------

  private sessionConfig(agentName: string, context?: string): SessionConfig {
    const agent = this.options.catalogue.get(agentName);
    const tools = this.options.runtime.toolsFor(agentName, this.agent).map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      ...(tool.jsonSchema !== undefined && { jsonSchema: tool.jsonSchema }),
    }));
    return {
      instructions:
        context === undefined
          ? (agent?.instructions ?? '')
          : `${agent?.instructions ?? ''}\n\n${context}`,
      // Agents one call can reach share a voice (checked at load): a session cannot change it.
      ...(agent?.voice !== undefined && { voice: agent.voice }),
      tools,
      inputFormat: this.modelFormat,
      outputFormat: this.modelFormat,
      turnDetection: { type: 'server_vad', createResponse: true, interruptResponse: true },
    };
  }

  private get quiet(): boolean {
    const answerOwed =
      this.answerOwedSince !== undefined &&
      this.clock.now() - this.answerOwedSince < TURN_ANSWER_WAIT_MS;
    return (
      !answerOwed &&
      !this.agent.responseActive &&
      !this.agent.callerSpeaking &&
      this.deliveries.count === 0 &&
      this.playing.size === 0 &&
      this.toolsRunning === 0
    );
  }

  /**
   * The model session in use is over (lost, or switched for a renewal): what it was saying stops,
   * its responses are forgotten, and results being spoken on it resolve failed (the caller did not
   * hear them whole), so delivery says them again. The caller's turn belonged to the old session's
   * turn detection: the next session starts with nobody speaking and no answer owed, or the gate
   * would hold results until the caller spoke again. Returns how many deliveries were cut.
   */
  private leaveModelSession(): number {
    this.agent.callerSpeaking = false;
    this.answerOwedSince = undefined;
    this.silenced.clear();
    this.unheard.clear();
    this.itemsByResponse.clear();
    this.clearPlayout();
    return this.deliveries.failAll();
  }

  /** Offers held results again shortly, when the line is still quiet then. */
  private offerAgainSoon(): void {
    this.clock.schedule(() => {
      if (
        !isEnding(this.lifecycle.phase) &&
        !this.agent.callerSpeaking &&
        !this.agent.responseActive
      )
        this.idle();
    }, RETRY_AFTER_DROP_MS);
  }

  private async endWithGoodbye(): Promise<void> {
    if (isLeaving(this.lifecycle.phase)) return;
    this.lifecycle.moveTo('saying_goodbye', 'model_lost');
    this.clearPlayout();
    await this.playPrompt('goodbye');
    await this.end('model_lost');
  }

  /** Plays one of callgate's own lines; resolves once it has been played out (or cleared, or the call ended). */
  private async playPrompt(kind: CallPromptKind): Promise<void> {
    const prompts = this.options.prompts;
    const rtp = this.rtp;
    if (prompts === undefined || rtp === undefined) return;
    const prompt = await prompts.get(kind, this.modelFormat);
    // An apology rendered only now must not follow the goodbye that has begun since.
    if (this.rtp === undefined || (isLeaving(this.lifecycle.phase) && kind !== 'goodbye')) return;
    const itemId = `prompt_${kind}_${++this.promptCount}`;
    callMetrics.apologies.inc({ kind, audio: prompt.rendered });
    this.emit(callEvents.prompt(kind, prompt.rendered, prompt.ms));
    this.log.info('prompt played', { kind, audio: prompt.rendered, ms: prompt.ms });
    const played = new Promise<void>((resolve) => this.promptWaiters.set(itemId, resolve));
    this.playing.add(itemId);
    rtp.play(itemId, prompt.audio);
    rtp.endItem(itemId);
    await Promise.race([played, sleep(this.clock, prompt.ms + PROMPT_SLACK_MS)]);
    this.promptWaiters.delete(itemId);
  }

  private clearPlayout(): PlayoutClearResult | null {
    return this.playoutCleared(this.rtp?.clear() ?? null);
  }

  private playoutCleared(result: PlayoutClearResult | null): PlayoutClearResult | null {
    // A result whose audio was still queued (the model is done long before the caller heard it all) is cut.
    this.deliveries.interrupted(result);
    this.playing.clear();
    for (const resolve of this.promptWaiters.values()) resolve();
    this.promptWaiters.clear();
    return result;
  }

  private async operationStates(): Promise<Map<string, string>> {
    const states = new Map<string, string>();
    for (const id of this.agent.operations.keys()) {
      const op = await this.options.ledger.get(this.agent.tenantId, id).catch(() => undefined);
      if (op) states.set(id, op.state);
    }
    return states;
  }

  private async reopenContext(): Promise<string> {
    return `The previous session of this call was interrupted; continue the conversation. The active agent is ${this.agent.activeAgent}.\n${this.agent.pendingSummary(await this.operationStates())}`;
  }

  /**
   * The model's active response, asked of its sequencer, the one place that knows; during a
   * response_done it still names that response (test/unit/realtime/response-sequencer-timing.test.ts).
   */
  private get activeResponseId(): string | undefined {
    return this.link.session?.activeResponseId;
  }

  /**
   * Whether the model is running a response, as the gate and the quiet checks see it: asked of the
   * session, except the one whose response_done is being handled (it is over for the call).
   */
  private modelResponding(): boolean {
    const active = this.activeResponseId;
    return active !== undefined && active !== this.endingResponseId;
  }

  /**
   * What the caller heard of an item: the milliseconds handed to the network, read without
   * clearing anything (a finished item reports its whole length, so it is not truncated). The
   * realtime client asks when the caller starts speaking and emits speech_started in the same
   * tick, where the playout is cleared: no frame goes out in between.
   */
  private playback(): PlaybackPosition {
    return { playedMs: (itemId: string) => this.rtp?.playedMs(itemId) };
  }

  private onModel(event: RealtimeEvent): void {
    const model = this.link.session;
    const rtp = this.rtp;
    if (model === undefined || rtp === undefined) return;
    switch (event.type) {
      case 'audio_delta': {
        if (this.silenced.has(event.responseId) || isEnding(this.lifecycle.phase)) {
          this.unheard.get(event.responseId)?.add(event.itemId);
          return;
        }
        let items = this.itemsByResponse.get(event.responseId);
        if (items === undefined) {
          items = new Set();
          this.itemsByResponse.set(event.responseId, items);
        }
        items.add(event.itemId);
        this.playing.add(event.itemId);
        this.deliveries.queued(
          event.responseId,
          event.itemId,
          event.audio.length / bytesPerMs(this.modelFormat),
        );
        rtp.play(event.itemId, event.audio);
        return;
      }
      case 'speech_started':
        this.onSpeechStarted(event);
        return;
      case 'speech_stopped':
        this.answerOwedSince = this.clock.now();
        this.agent.callerSpeaking = false;
        this.agent.turnId++;
        this.emit(callEvents.callerSpeech('stopped'));
        if (!this.agent.responseActive) this.idle();
        return;
      case 'response_created': {
        this.answerOwedSince = undefined;
        // Created after the caller started talking: it was asked for before the barge-in (the
        // server's own responses come after speech stops), and the client cancels it now. Its audio
        // already on the way must not play over the caller.
        if (this.agent.callerSpeaking) {
          this.silenced.add(event.responseId);
          this.unheard.set(event.responseId, new Set());
        }
        // A result's response knows it is created from its handle, before this event.
        this.emit(callEvents.response('created', event.responseId));
        return;
      }
      case 'response_done':
        this.endingResponseId = event.responseId;
        try {
          this.onResponseDone(event, model, rtp);
        } finally {
          this.endingResponseId = undefined;
        }
        return;
      case 'function_call':
        this.toolsRunning++;
        this.toolChain = this.toolChain
          .then(() => this.runTool(model, event))
          .finally(() => {
            this.toolsRunning--;
            this.link.renewIfQuiet(false);
          });
        return;
      case 'transcript_done':
        if (event.role === 'assistant' && event.transcript !== '')
          this.emit(callEvents.agentSaid(event.responseId, event.transcript));
        return;
      case 'session_expiring':
        this.link.onExpiring(event.remainingMs);
        return;
      case 'disconnected':
        this.link.onDisconnected(event);
        return;
      case 'error':
        // A result's request the model gives up on is refused on its handle (DeliveryPort).
        this.log.debug('model error', {
          code: event.code,
          message: event.message,
          provider_code: event.providerCode,
        });
        return;
      default:
        return;
    }
  }

  /** A response is over on the model's side; what it carried settles once its audio played out or was cut. */
  private onResponseDone(
    event: Extract<RealtimeEvent, { type: 'response_done' }>,
    model: RealtimeSession,
    rtp: CallRtp,
  ): void {
    for (const item of this.itemsByResponse.get(event.responseId) ?? []) rtp.endItem(item);
    this.itemsByResponse.delete(event.responseId);
    for (const item of this.unheard.get(event.responseId) ?? []) model.truncate(item, 0);
    this.unheard.delete(event.responseId);
    // A response the caller talked over was not heard whole, however it ended on the model's side.
    const heard = !this.silenced.delete(event.responseId);
    // Settles only once its audio has also played out (or been cut): see SpokenResponse.
    this.deliveries.done(
      event.responseId,
      event.status === 'completed' && heard
        ? 'completed'
        : event.status === 'failed' || event.status === 'incomplete'
          ? 'failed'
          : 'cancelled',
    );
    this.emit(callEvents.response('done', event.responseId, event.status));
    if (!this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
  }

  /** Barge-in: the model's response is cancelled (client or server), playout cleared, item truncated. */
  private onSpeechStarted(event: Extract<RealtimeEvent, { type: 'speech_started' }>): void {
    this.agent.callerSpeaking = true;
    const cleared = this.clearPlayout();
    const speaking = this.activeResponseId !== undefined || cleared !== null;
    if (this.activeResponseId !== undefined) this.silenced.add(this.activeResponseId);
    this.emit(callEvents.callerSpeech('started'));
    if (speaking) {
      this.emit(
        callEvents.bargeIn(
          event.interruption?.itemId ?? cleared?.itemId,
          event.interruption?.playedMs ?? cleared?.sentMs,
          cleared?.droppedMs ?? 0,
        ),
      );
    }
  }

  /**
   * The process stalled with agent audio queued and the media dropped it (rtp.stallCutMs): like a
   * barge-in without a caller, the response is cancelled and its item truncated at what was sent,
   * and a result it carried is said again if still due (test/unit/call/playout-stall.test.ts).
   */
  private onPlayoutStalled(gapMs: number, cleared: PlayoutClearResult): void {
    this.log.warn('the process stalled; what the agent was saying is cut', {
      gap_ms: gapMs,
      item_id: cleared.itemId,
      sent_ms: cleared.sentMs,
    });
    this.playoutCleared(cleared);
    const model = this.link.session;
    const active = this.activeResponseId;
    if (active !== undefined) {
      this.silenced.add(active);
      model?.cancelResponse();
    }
    model?.truncate(cleared.itemId, cleared.sentMs);
    this.emit(callEvents.playoutStalled(gapMs, cleared.itemId, cleared.sentMs));
  }

  private idle(): void {
    if (isEnding(this.lifecycle.phase)) return;
    this.options.delivery
      .onIdle(this.sessionId)
      .catch((error: unknown) => this.log.warn('delivery on idle failed', { error }));
    this.link.renewIfQuiet(false);
  }

  private async runTool(
    model: RealtimeSession,
    event: Extract<RealtimeEvent, { type: 'function_call' }>,
  ): Promise<void> {
    const before = this.agent.activeAgent;
    let output: ToolOutput;
    let answered = true;
    try {
      output = await this.options.runtime.handle(
        this.agent,
        {
          callId: event.callId,
          name: event.name,
          arguments: event.arguments,
          responseId: event.responseId,
        },
        this.control(),
      );
    } catch (error) {
      this.log.error('tool call failed', { tool: event.name, call_id: event.callId, error });
      output = toolError(error);
      answered = false;
    }
    const operationId = typeof output.operation_id === 'string' ? output.operation_id : undefined;
    this.emit(callEvents.toolCall(event.name, event.callId, output.status, operationId));
    // The output goes to the session that asked; a re-opened session never saw the call.
    const current = model === this.link.session && !isEnding(this.lifecycle.phase);
    const speaking = current ? model.sendToolOutput(event.callId, output) : undefined;
    // An error output carries no read's answer, whatever the tool had found.
    this.followInlineAnswer(event.callId, answered ? speaking : undefined);
    const after = this.agent.activeAgent;
    if (after !== before && current) {
      this.emit(callEvents.agentChanged(before, after));
      // The new agent learns what the call is waiting for: operations belong to the call, not the agent.
      const context = `The call was handed to you by the ${before} agent.\n${this.agent.pendingSummary(await this.operationStates())}`;
      await model
        .configure(this.sessionConfig(after, context))
        .catch((error: unknown) =>
          this.log.warn('reconfiguring the model after a handoff failed', { error }),
        );
    }
  }

  /**
   * A read answered in a tool output is told once the response that speaks it played to its end:
   * the one whose handle the session gave for the output (the tool turn's follow-up, or the
   * caller's next turn when the turn was cut). An output not sent, or a session lost or cut first,
   * leaves the read to delivery (test/scenarios/model-lost-between-read-commit-and-output.test.ts).
   */
  private followInlineAnswer(callId: string, speaking: ResponseHandle | undefined): void {
    const { runtime } = this.options;
    const operationId = runtime.inlineAnswer(this.agent, callId);
    if (operationId === undefined) return;
    const heard =
      speaking !== undefined
        ? this.deliveries.toolOutputResponse(operationId, speaking).outcome
        : Promise.resolve(undefined);
    void heard
      .then((outcome) => runtime.settleInlineAnswer(this.agent, callId, outcome))
      .then(() => {
        // Told or released, the held result event is judged at the next quiet moment: maybe now.
        if (!this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
      })
      .catch((error: unknown) =>
        this.log.warn('settling a read answered in a tool output failed', {
          operation_id: operationId,
          error,
        }),
      );
  }

  private control(): CallControl {
    return {
      transfer: async () => {
        const target =
          this.options.catalogue.get(this.agent.activeAgent)?.transferTarget ??
          this.options.call.tenant.transferTarget;
        if (target === undefined) return { ok: false, detail: 'no transfer target configured' };
        const outcome = await this.options.call.dialog.transfer(target).catch((error: unknown) => ({
          type: 'failed' as const,
          status: 500,
          reason: error instanceof Error ? error.message : String(error),
        }));
        this.emit(callEvents.transfer(target, outcome));
        // A refused REFER keeps the call: the agent apologises and goes on.
        return outcome.type === 'succeeded'
          ? { ok: true, detail: target }
          : { ok: false, detail: `${target}: ${outcome.status} ${outcome.reason}` };
      },
    };
  }

  // ---- signaling and media -------------------------------------------------------------------

  private onDialog(event: DialogEvent): void {
    switch (event.type) {
      case 'dtmf':
        if (/^[0-9A-D*#]$/.test(event.digit))
          this.rtp?.injectDigit(event.digit as DtmfDigit, event.durationMs);
        return;
      case 'ack':
        // A delayed offer: the ACK's answer settles the media that the provisional choice stood in for.
        if (event.media === undefined) return;
        this.applyMedia(event.media);
        return;
      case 'reinvite':
        this.applyMedia(event.media, event.source);
        return;
      case 'ended':
        void this.end(endReasonOf(event.reason), event.reason);
        return;
      default:
        return;
    }
  }

  /** `signaling`: where the re-INVITE came from, which may send the media too. */
  private applyMedia(media: NegotiatedMedia, signaling?: string): void {
    if (this.rtp === undefined) return;
    this.rtp.setRemote(media.remote, signaling);
    this.rtp.setSrtp(media.srtp);
    applyDirection(this.rtp, media);
    this.applyHold(media);
    this.applyCodec(media);
  }

  /**
   * The caller holds the call when our answer may not send (they offered sendonly or inactive, or
   * the hold address): the phase becomes `on_hold`, the gate then holds results rather than speak
   * them unheard, and the resume offers them at once, measured from the resume
   * (test/scenarios/result-during-hold.test.ts, test/unit/call/hold-then-resume.test.ts).
   */
  private applyHold(media: NegotiatedMedia): void {
    const onHold = !(media.direction === 'sendrecv' || media.direction === 'sendonly');
    if (onHold === this.callerHolds) return;
    this.callerHolds = onHold;
    if (!onHold) this.agent.resumedAt = this.clock.epochMs();
    const phase = this.lifecycle.phase;
    if (phase === 'live' || phase === 'renewing' || phase === 'on_hold') {
      this.lifecycle.moveTo(
        onHold ? 'on_hold' : this.link.renewalPending ? 'renewing' : 'live',
        onHold ? 'caller_held' : 'caller_resumed',
      );
    }
    this.emit(callEvents.hold(onHold ? 'held' : 'resumed'));
    this.log.info(onHold ? 'caller holds the call' : 'caller resumed the call', {
      direction: media.direction,
    });
    if (!onHold && !this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
  }

  /**
   * A re-INVITE that changed the codec switches the live RTP session; the model keeps the format
   * it was configured with (changing it would mean a new session), so the media layer transcodes
   * from here on where it passed G.711 through before. Costs CPU, keeps the call and its context.
   */
  private applyCodec(media: NegotiatedMedia): void {
    const rtp = this.rtp;
    if (
      rtp === undefined ||
      (media.codec === this.wireCodec?.codec && media.payloadType === this.wireCodec.payloadType)
    )
      return;
    const from = this.wireCodec?.codec ?? 'PCMU';
    rtp.setCodec({
      codec: wireCodec(media.codec, media.payloadType),
      ...(media.telephoneEvent !== undefined && {
        telephoneEventPayloadType: media.telephoneEvent.payloadType,
      }),
    });
    this.wireCodec = { codec: media.codec, payloadType: media.payloadType };
    const passthrough =
      (media.codec === 'PCMU' && this.modelFormat === 'pcmu') ||
      (media.codec === 'PCMA' && this.modelFormat === 'pcma');
    this.emit(callEvents.codecChanged(from, media.codec, passthrough));
    this.log.info('codec changed by re-INVITE', {
      from,
      to: media.codec,
      payload_type: media.payloadType,
      passthrough,
    });
  }

  private onMedia(event: RtpSessionEvent): void {
    switch (event.type) {
      case 'audio':
        this.uplink.push(event.audio);
        return;
      case 'dtmf':
        this.emit(callEvents.dtmf(event.digit, event.source));
        this.answerOwedSince = this.clock.now();
        this.uplink.flush();
        this.link.session?.sendDtmf(event.digit);
        return;
      case 'item-started':
        this.deliveries.itemSent(event.itemId);
        return;
      case 'item-played': {
        this.playing.delete(event.itemId);
        this.deliveries.itemPlayed(event.itemId, event.sentMs);
        const prompt = this.promptWaiters.get(event.itemId);
        if (prompt !== undefined) prompt();
        this.link.renewIfQuiet(false);
        return;
      }
      case 'playout-stalled':
        this.onPlayoutStalled(event.gapMs, event.cleared);
        return;
      case 'media-timeout':
        this.log.warn('no media from the caller', {
          reason: event.reason,
          silent_ms: event.silentMs,
        });
        void this.end('media_timeout');
        return;
      default:
        return;
    }
  }

  // ---- the end ---------------------------------------------------------------------------------

  private reject(status: number, reason: string, headers: readonly SipHeader[] = []): false {
    this.options.call.reject(status, reason, headers);
    callMetrics.ended.inc({ tenant: this.options.call.tenant.id, reason: 'rejected' });
    this.lifecycle.moveTo('ended', 'rejected');
    this.emit(callEvents.rejected(status, reason));
    this.log.info('call rejected', { status, reason });
    return false;
  }

  private end(reason: CallEndReason, dialogReason?: DialogEndReason): Promise<void> {
    return this.teardown.end(reason, dialogReason);
  }

  /** What the end stops at once: results being spoken fail, everything started under the call aborts. */
  private release(): void {
    this.deliveries.failAll();
    this.abort.abort();
    this.link.cancelRenewal();
    for (const resolve of this.promptWaiters.values()) resolve();
    this.promptWaiters.clear();
  }

  private emit(event: CallEvent): void {
    const at = this.clock.epochMs();
    // A call has a record (and a timeline) from its answer; what happened while it rang is logged.
    if (this.recorded) {
      this.options.registry
        .appendEvent(this.sessionId, event, at)
        .catch((error: unknown) => this.log.debug('call event not recorded', { error }));
    }
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.log.error('call event listener failed', { error, event: event.type });
      }
    }
  }
}

/**
 * RFC 3264 §6.1 from the media's side: RTP goes to the caller only when our answer sends
 * (sendrecv, sendonly), and no media timeout runs while the caller sends nothing by agreement
 * (it holds the call, or our answer is sendonly or inactive).
 */
function applyDirection(rtp: CallRtp, media: NegotiatedMedia): void {
  rtp.setSending(media.direction === 'sendrecv' || media.direction === 'sendonly');
  rtp.setHold(media.held || media.direction === 'sendonly' || media.direction === 'inactive');
}

/** A Warning header (RFC 3261 20.43, code 399) carrying `text`. */
function warningHeaders(text: string): readonly SipHeader[] {
  return [{ name: 'Warning', value: warningValue(text) }];
}
