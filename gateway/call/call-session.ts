/**
 * One call, end to end: the SIP dialog, its RTP session, its realtime model session and its agent
 * session. Caller audio goes to the model, model audio is paced back to the caller, DTMF reaches
 * the model as events, function calls run through the tool runtime, and results come back through
 * result delivery (the ConversationPort below). See README.md in this folder for the sequence.
 *
 * The call never decides what happened to an operation: barge-in, hang-up, transfer and a lost
 * model change what is said and where, never the ledger.
 */
import { ulid } from 'ulid';
import { isCallgateError } from '../../config/errors.ts';
import type { Logger } from '../../config/log.ts';
import { observeWithExemplar } from '../../config/metrics.ts';
import type { RtpConfig } from '../../config/schema.ts';
import type { AgentCatalogue, ToolOutput } from '../../agents/agent.ts';
import { AgentSession } from '../../agents/agent-session.ts';
import type { ConversationPort, ResultDelivery } from '../../agents/result-delivery.ts';
import { toolError, type CallControl, type ToolRuntime } from '../../agents/tool-runtime.ts';
import type { OperationLedger } from '../../jobs/ledger/operation-ledger.ts';
import type { ModelAudioFormat } from '../media/audio-format.ts';
import { wireCodec } from '../media/audio-format.ts';
import type { MediaTimer } from '../media/media-timer.ts';
import type { PlayoutClearResult } from '../media/playout.ts';
import type { PlayoutScheduler } from '../media/playout-scheduler.ts';
import type { RtpPortAllocator } from '../media/rtp-port-allocator.ts';
import { RtpSession } from '../media/rtp-session.ts';
import type { RtpSessionEvent } from '../media/rtp-session-events.ts';
import type { DtmfDigit } from '../media/telephone-event.ts';
import type { RealtimeModel } from '../realtime/realtime-model.ts';
import type { AudioFormat, PlaybackPosition, RealtimeEvent, RealtimeSession, SessionConfig } from '../realtime/realtime-session.ts';
import { answerOffer, type NegotiatedMedia } from '../sip/sdp-negotiation.ts';
import type { DialogEndReason, DialogEvent, InboundCall } from '../sip/signaling-driver.ts';
import { callEvents, type CallEndReason, type CallEvent } from './call-events.ts';
import { callMetrics } from './call-metrics.ts';
import type { CallPromptKind, CallPrompts } from './call-prompts.ts';
import type { CallRegistry } from './call-registry.ts';
import { SpokenResponse } from './spoken-response.ts';

/**
 * How long a spoken result may take from request to its last packet played out. Above the realtime
 * client's RESPONSE_CREATED_TIMEOUT_MS (10 s) plus a long spoken sentence played in real time; past
 * it the result is treated as not heard and delivery says it again when the caller is idle.
 */
export const DELIVERY_TIMEOUT_MS = 45_000;
/**
 * After the model gave up a result's response, or a renewal cut one short, how soon a quiet call
 * is offered it again (nothing else would: the line is silent and no model event is coming).
 */
const RETRY_AFTER_DROP_MS = 1_000;
/** A lost model session is re-opened this many times in one call; then the call ends politely. */
export const MAX_MODEL_REOPENS = 1;
/** Tool calls still running at hang-up get this long to be admitted before delivery is told the call ended. */
export const TOOL_SETTLE_MS = 2_000;
/**
 * Caller audio goes to the model in batches of this many milliseconds rather than as 20 ms
 * frames: a third of the WebSocket messages (each a JSON event, base64 and a masked frame, and the
 * same again to read on the model's side), for at most 40 ms more before the model hears the
 * caller. Far below the server VAD's prefix padding (300 ms) and silence duration (500 ms), so
 * turn detection and barge-in are unchanged; a key press flushes the batch first, keeping order.
 */
export const MODEL_AUDIO_BATCH_MS = 60;
const FRAME_MS = 20;
/** Bounds the BYE at the end of a call ended by callgate (the dialog retransmits within it). */
const HANGUP_TIMEOUT_MS = 5_000;
/**
 * The goodbye prompt may hold the BYE this much longer than its own length (pacing, a busy
 * scheduler). Far below HANGUP_TIMEOUT_MS in effect: the caller is not kept on a dead line.
 */
const PROMPT_SLACK_MS = 1_500;
/**
 * A session about to expire is renewed at a quiet moment; when none comes, this long before the
 * provider's limit it is renewed anyway (an interruption now beats being cut off at the limit).
 * Below SESSION_EXPIRY_WARNING_MS (5 min) in the realtime client, or renewal would never wait.
 */
export const FORCED_RENEWAL_BEFORE_LIMIT_MS = 30_000;
/**
 * After the caller's turn ends (speech stopped, a key pressed) the model owes an answer; a switch
 * in between would lose the turn. A response that has not started this long after is not coming.
 */
const TURN_ANSWER_WAIT_MS = 3_000;

export interface CallMedia {
  readonly config: RtpConfig;
  readonly ports: RtpPortAllocator;
  readonly scheduler: PlayoutScheduler;
  readonly timer: MediaTimer;
}

export interface CallSessionOptions {
  readonly call: InboundCall;
  readonly media: CallMedia;
  readonly model: Pick<RealtimeModel, 'openSession'>;
  readonly catalogue: AgentCatalogue;
  readonly runtime: Pick<ToolRuntime, 'handle' | 'toolsFor'>;
  readonly delivery: Pick<ResultDelivery, 'attach' | 'onIdle' | 'onCallEnded'>;
  readonly ledger: Pick<OperationLedger, 'get'>;
  readonly registry: CallRegistry;
  readonly gatewayId: string;
  readonly log: Logger;
  readonly sessionId?: string;
  /** The apology and goodbye lines; without them the caller hears nothing while the model is re-opened. */
  readonly prompts?: Pick<CallPrompts, 'get'>;
}

type Listener = (event: CallEvent) => void;

/** The model audio format for a wire codec: G.711 passes through untouched, Opus goes via 24 kHz PCM. */
function modelFormats(codec: NegotiatedMedia['codec']): { model: ModelAudioFormat; realtime: AudioFormat } {
  if (codec === 'PCMU') return { model: { encoding: 'pcmu' }, realtime: 'pcmu' };
  if (codec === 'PCMA') return { model: { encoding: 'pcma' }, realtime: 'pcma' };
  return { model: { encoding: 'pcm16', sampleRate: 24000 }, realtime: 'pcm24k' };
}

export class CallSession {
  readonly sessionId: string;
  readonly agent: AgentSession;
  private readonly options: CallSessionOptions;
  private readonly log: Logger;
  private readonly listeners = new Set<Listener>();
  private readonly abort = new AbortController();
  private rtp: RtpSession | undefined;
  private model: RealtimeSession | undefined;
  private modelFormat: AudioFormat = 'pcmu';
  /** The codec on the wire now (the answer's, then each re-INVITE's). */
  private wireCodec: { readonly codec: NegotiatedMedia['codec']; readonly payloadType: number } | undefined;
  /** Bumped per model session; events of an older session are ignored. */
  private generation = 0;
  private reopens = 0;
  private modelReady: Promise<boolean> = Promise.resolve(false);
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
  /** Results being spoken, each a response from its request to the last packet played (or its cut). */
  private readonly deliveries: SpokenResponse[] = [];
  private deliverySeq = 0;
  private toolChain: Promise<void> = Promise.resolve();
  private ended: Promise<void> | undefined;
  private ending = false;
  /** The goodbye prompt is on its way; `ending` is set only once it has played. */
  private sayingGoodbye = false;
  /** openModel() is connecting or configuring a session: a loss now is its failure, owned by whoever awaits it. */
  private opening = false;
  /** performance.now() at the answer, for the duration metric; undefined until answered. */
  private answeredAt: number | undefined;
  /** Items handed to the playout and not yet played out or cleared. */
  private readonly playing = new Set<string>();
  /** Prompts waiting for their last frame to go out. */
  private readonly promptWaiters = new Map<string, () => void>();
  private promptCount = 0;
  private toolsRunning = 0;
  /** Caller frames not yet sent to the model (see MODEL_AUDIO_BATCH_MS). */
  private readonly audioBatch: Buffer[] = [];
  /** When the caller's last turn ended and no response has started since (undefined: none owed). */
  private answerOwedSince: number | undefined;
  /** The provider's session limit is near: renew at the next quiet moment. */
  private renewal: { readonly forceAt: number; readonly timer: NodeJS.Timeout; standby?: Promise<RealtimeSession | undefined> } | undefined;

  constructor(options: CallSessionOptions) {
    this.options = options;
    this.sessionId = options.sessionId ?? `call_${ulid()}`;
    const { call } = options;
    this.log = options.log.child({ session_id: this.sessionId, sip_call_id: call.callId, tenant_id: call.tenant.id });
    this.agent = new AgentSession({
      sessionId: this.sessionId,
      tenantId: call.tenant.id,
      caller: call.caller.user ?? call.caller.uri,
      ownerGateway: options.gatewayId,
      agent: call.agent,
    });
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves when the call has ended (or was rejected) and everything it held is released. */
  get done(): Promise<void> {
    return this.ended ?? new Promise((resolve) => this.on((event) => (event.type === 'ended' || event.type === 'rejected') && resolve()));
  }

  get rtpSession(): RtpSession | undefined {
    return this.rtp;
  }

  /**
   * Answers the call: media first (so the SDP answer carries its port), then the model. Returns
   * false when the call was rejected (no common codec, no media ports, unknown agent).
   */
  async start(): Promise<boolean> {
    const { call, media, catalogue } = this.options;
    if (catalogue.get(call.agent) === undefined) return this.reject(500, 'Agent Not Configured');
    const offer = call.offer;
    // The codec is known before any port is taken; the real answer is built by accept().
    const probe = offer === undefined ? undefined : answerOffer(offer, { preference: call.tenant.codecs, local: { address: media.config.listen, port: 9 }, sessionId: '0', sessionVersion: 0 });
    if (probe !== undefined && !probe.ok) return this.reject(488, 'Not Acceptable Here');
    const codecName = probe?.media.codec ?? 'PCMU';
    const formats = modelFormats(codecName);
    this.modelFormat = formats.realtime;
    try {
      this.rtp = await RtpSession.open({
        config: media.config,
        ports: media.ports,
        scheduler: media.scheduler,
        timer: media.timer,
        codec: wireCodec(codecName, probe?.media.payloadType),
        ...(probe?.media.telephoneEvent !== undefined && { telephoneEventPayloadType: probe.media.telephoneEvent.payloadType }),
        model: formats.model,
        ...(probe !== undefined && { remote: probe.media.remote }),
        logger: this.log,
        cname: this.sessionId,
      });
    } catch (error) {
      if (isCallgateError(error, 'CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED')) return this.reject(503, 'Service Unavailable');
      this.log.error('media could not be opened', { error });
      return this.reject(500, 'Server Internal Error');
    }
    const rtp = this.rtp;
    const accepted = call.accept({ local: { address: rtp.localAddress, port: rtp.localPort } });
    if (!accepted.ok) {
      await rtp.close();
      callMetrics.ended.inc({ tenant: call.tenant.id, reason: 'rejected' });
      this.emit(callEvents.rejected(accepted.status, accepted.reason));
      return false;
    }
    rtp.setRemote(accepted.media.remote);
    applyDirection(rtp, accepted.media);
    this.applyHold(accepted.media);
    this.wireCodec = { codec: accepted.media.codec, payloadType: accepted.media.payloadType };
    rtp.on((event) => this.onMedia(event));
    call.dialog.on((event) => this.onDialog(event));
    this.options.delivery.attach(this.agent, this.port());
    await this.options.registry
      .open({
        sessionId: this.sessionId,
        tenantId: call.tenant.id,
        sipCallId: call.callId,
        caller: call.caller.user ?? call.caller.uri,
        calledNumber: call.calledNumber,
        agent: call.agent,
        startedAt: Date.now(),
      })
      .catch((error: unknown) => this.log.warn('session registry entry failed', { error }));
    this.answeredAt = performance.now();
    observeWithExemplar(callMetrics.setupSeconds, { tenant: call.tenant.id }, Math.max(0, this.answeredAt - call.receivedAt) / 1000, { session_id: this.sessionId });
    callMetrics.active.inc({ tenant: call.tenant.id });
    this.emit(callEvents.answered(accepted.media.codec, accepted.media.codec !== 'opus', rtp.localPort));
    this.log.info('call answered', { codec: accepted.media.codec, rtp_port: rtp.localPort, agent: call.agent });
    this.modelReady = this.openModel(false);
    if (!(await this.modelReady) && !this.ending) await this.end('model_lost');
    return true;
  }

  /** Ends the call from callgate's side (shutdown, operator); the BYE goes out first. */
  hangup(reason: CallEndReason = 'agent_hung_up'): Promise<void> {
    return this.end(reason);
  }

  // ---- the model -----------------------------------------------------------------------------

  private sessionConfig(agentName: string, context?: string): SessionConfig {
    const agent = this.options.catalogue.get(agentName);
    const tools = this.options.runtime.toolsFor(agentName).map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }));
    return {
      instructions: context === undefined ? (agent?.instructions ?? '') : `${agent?.instructions ?? ''}\n\n${context}`,
      tools,
      inputFormat: this.modelFormat,
      outputFormat: this.modelFormat,
      turnDetection: { type: 'server_vad', createResponse: true, interruptResponse: true },
    };
  }

  /** Opens, connects and configures a model session; on a re-open, with a summary of the call so far. */
  private async openModel(reopen: boolean): Promise<boolean> {
    const generation = ++this.generation;
    const session = this.options.model.openSession({ playback: this.playback(), signal: this.abort.signal, logger: this.log });
    this.model = session;
    session.onAny((event) => {
      if (generation === this.generation) this.onModel(event);
    });
    this.opening = true;
    try {
      await session.connect();
      const context = reopen ? await this.reopenContext() : undefined;
      await session.configure(this.sessionConfig(this.agent.activeAgent, context));
    } catch (error) {
      this.log.warn('model session could not be opened', { error, reopen });
      await session.close().catch(() => undefined);
      return false;
    } finally {
      this.opening = false;
    }
    if (this.ending) return false;
    if (!reopen && this.answeredAt !== undefined) observeWithExemplar(callMetrics.modelReadySeconds, { tenant: this.agent.tenantId }, (performance.now() - this.answeredAt) / 1000, { session_id: this.sessionId });
    this.emit(callEvents.modelReady(generation, this.agent.activeAgent));
    if (reopen) {
      // The caller already heard the apology prompt; a real model reads this as an instruction, the simulator speaks it.
      session.addSystemMessage('I am back with you.');
    }
    session.createResponse();
    if (reopen) void this.options.delivery.onIdle(this.sessionId).catch((error: unknown) => this.log.warn('delivery after re-open failed', { error }));
    return true;
  }

  /**
   * The provider's session limit is near. Rather than be cut off mid-sentence at the limit, the
   * call opens a new session with the same summary a re-open gets, and switches to it when
   * nobody is speaking and nothing is owed to the old one (no response, delivery or tool turn).
   */
  private onExpiring(remainingMs: number): void {
    if (this.ending || this.renewal !== undefined) return;
    // Short limits (tests, small providers) still leave half the warning to find a quiet moment.
    const forceInMs = Math.max(remainingMs - FORCED_RENEWAL_BEFORE_LIMIT_MS, remainingMs / 2);
    const timer = setTimeout(() => this.renewIfQuiet(true), forceInMs);
    timer.unref();
    this.renewal = { forceAt: Date.now() + forceInMs, timer };
    this.emit(callEvents.modelExpiring(remainingMs));
    this.log.info('model session expiring; renewing at the next quiet moment', { remaining_ms: remainingMs });
    this.renewIfQuiet(false);
  }

  private get quiet(): boolean {
    const answerOwed = this.answerOwedSince !== undefined && Date.now() - this.answerOwedSince < TURN_ANSWER_WAIT_MS;
    return !answerOwed && !this.agent.responseActive && !this.agent.callerSpeaking && this.deliveries.length === 0 && this.playing.size === 0 && this.toolsRunning === 0;
  }

  private renewIfQuiet(force: boolean): void {
    const renewal = this.renewal;
    if (renewal === undefined || this.ending || (!force && !this.quiet)) return;
    // The new session is connected and configured while the old one still serves the caller.
    renewal.standby ??= this.openStandby();
    const pending = renewal.standby;
    void pending.then((standby) => {
      // A standby lost before the switch is forgotten; the next quiet moment opens another.
      if (standby === undefined || this.renewal !== renewal || renewal.standby !== pending) return;
      if (this.ending) {
        void standby.close().catch(() => undefined);
        return;
      }
      // Quiet may have ended while the standby connected: wait for the next one (or the deadline).
      if (!this.quiet && Date.now() < renewal.forceAt) return;
      this.switchTo(standby);
    });
  }

  private async openStandby(): Promise<RealtimeSession | undefined> {
    const session = this.options.model.openSession({ playback: this.playback(), signal: this.abort.signal, logger: this.log });
    session.onAny((event) => {
      if (session === this.model) this.onModel(event);
      else if (event.type === 'disconnected' && this.renewal !== undefined) this.renewal.standby = undefined;
    });
    try {
      await session.connect();
      await session.configure(this.sessionConfig(this.agent.activeAgent, await this.reopenContext()));
      return session;
    } catch (error) {
      // The old session serves on; its hard limit ends in a re-open.
      this.log.warn('renewing the model session failed', { error });
      callMetrics.modelReopens.inc({ cause: 'expiring', outcome: 'failed' });
      await session.close().catch(() => undefined);
      return undefined;
    }
  }

  private switchTo(session: RealtimeSession): void {
    const renewal = this.renewal;
    if (renewal !== undefined) clearTimeout(renewal.timer);
    this.renewal = undefined;
    const old = this.model;
    // Events of the old session are ignored from here on: its generation is over.
    const generation = ++this.generation;
    this.model = session;
    // A forced switch may cut the old session mid-sentence: nothing of it plays on, and a result it
    // was speaking is said again on the new one.
    const cut = this.leaveModelSession();
    void old?.close().catch((error: unknown) => this.log.debug('closing the expiring model session failed', { error }));
    callMetrics.modelReopens.inc({ cause: 'expiring', outcome: 'ok' });
    this.modelReady = Promise.resolve(true);
    this.emit(callEvents.modelRenewed(generation, this.agent.activeAgent));
    this.log.info('model session renewed before its limit', { attempt: generation, results_cut: cut });
    if (cut > 0) this.offerAgainSoon();
  }

  /**
   * The model session in use is over (lost, or switched for a renewal): what it was saying stops,
   * its responses are forgotten, and results being spoken on it resolve failed (the caller did not
   * hear them whole), so delivery says them again. The caller's turn belonged to the old session's
   * turn detection: the next session starts with nobody speaking and no answer owed, or the gate
   * would hold results until the caller spoke again. Returns how many deliveries were cut.
   */
  private leaveModelSession(): number {
    this.agent.responseActive = false;
    this.agent.callerSpeaking = false;
    this.answerOwedSince = undefined;
    this.silenced.clear();
    this.unheard.clear();
    this.itemsByResponse.clear();
    this.clearPlayout();
    const cut = this.deliveries.splice(0);
    for (const spoken of cut) spoken.fail();
    return cut.length;
  }

  /** Offers held results again shortly, when the line is still quiet then. */
  private offerAgainSoon(): void {
    setTimeout(() => {
      if (!this.ending && !this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
    }, RETRY_AFTER_DROP_MS).unref();
  }

  /** Plays one of callgate's own lines; resolves once it has been played out (or cleared, or the call ended). */
  private async playPrompt(kind: CallPromptKind): Promise<void> {
    const prompts = this.options.prompts;
    const rtp = this.rtp;
    if (prompts === undefined || rtp === undefined) return;
    const prompt = await prompts.get(kind, this.modelFormat);
    // An apology rendered only now must not follow the goodbye that has begun since.
    if (this.rtp === undefined || ((this.ending || this.sayingGoodbye) && kind !== 'goodbye')) return;
    const itemId = `prompt_${kind}_${++this.promptCount}`;
    callMetrics.apologies.inc({ kind, audio: prompt.rendered });
    this.emit(callEvents.prompt(kind, prompt.rendered, prompt.ms));
    this.log.info('prompt played', { kind, audio: prompt.rendered, ms: prompt.ms });
    const played = new Promise<void>((resolve) => this.promptWaiters.set(itemId, resolve));
    this.playing.add(itemId);
    rtp.play(itemId, prompt.audio);
    rtp.endItem(itemId);
    const bound = new Promise<void>((resolve) => setTimeout(resolve, prompt.ms + PROMPT_SLACK_MS).unref());
    await Promise.race([played, bound]);
    this.promptWaiters.delete(itemId);
  }

  private flushAudio(): void {
    if (this.audioBatch.length === 0) return;
    const audio = this.audioBatch.length === 1 ? this.audioBatch[0] : Buffer.concat(this.audioBatch);
    this.audioBatch.length = 0;
    if (audio !== undefined) this.model?.sendAudio(audio);
  }

  private clearPlayout(): PlayoutClearResult | null {
    const result = this.rtp?.clear() ?? null;
    // A result whose audio was still queued (the model is done long before the caller heard it all) is cut.
    for (const spoken of [...this.deliveries]) spoken.interrupted(result);
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
    return this.model?.activeResponseId;
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
    const model = this.model;
    const rtp = this.rtp;
    if (model === undefined || rtp === undefined) return;
    switch (event.type) {
      case 'audio_delta': {
        if (this.silenced.has(event.responseId) || this.ending) {
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
        this.deliveries.find((spoken) => spoken.responseId === event.responseId)?.queued(event.itemId);
        rtp.play(event.itemId, event.audio);
        return;
      }
      case 'speech_started':
        this.onSpeechStarted(event);
        return;
      case 'speech_stopped':
        this.answerOwedSince = Date.now();
        this.agent.callerSpeaking = false;
        this.agent.turnId++;
        this.emit(callEvents.callerSpeech('stopped'));
        if (!this.agent.responseActive) this.idle();
        return;
      case 'response_created': {
        this.answerOwedSince = undefined;
        this.agent.responseActive = true;
        // Created after the caller started talking: it was asked for before the barge-in (the
        // server's own responses come after speech stops), and the client cancels it now. Its audio
        // already on the way must not play over the caller.
        if (this.agent.callerSpeaking) {
          this.silenced.add(event.responseId);
          this.unheard.set(event.responseId, new Set());
        }
        // The response that speaks a result is the one created for its request's tag, never merely
        // the next one: a response the server started itself may predate the result's message.
        // A request the model gives up on is reported by its tag (an error) and fails at once.
        const spoken = event.tag === undefined ? undefined : this.deliveries.find((w) => w.tag === event.tag && w.responseId === undefined);
        spoken?.created(event.responseId);
        this.emit(callEvents.response('created', event.responseId));
        return;
      }
      case 'response_done': {
        for (const item of this.itemsByResponse.get(event.responseId) ?? []) rtp.endItem(item);
        this.itemsByResponse.delete(event.responseId);
        for (const item of this.unheard.get(event.responseId) ?? []) model.truncate(item, 0);
        this.unheard.delete(event.responseId);
        // A response the caller talked over was not heard whole, however it ended on the model's side.
        const heard = !this.silenced.delete(event.responseId);
        if (this.activeResponseId === event.responseId) this.agent.responseActive = false;
        // Settles only once its audio has also played out (or been cut): see SpokenResponse.
        this.deliveries.find((spoken) => spoken.responseId === event.responseId)?.done(event.status === 'completed' && heard ? 'completed' : event.status === 'failed' || event.status === 'incomplete' ? 'failed' : 'cancelled');
        this.emit(callEvents.response('done', event.responseId, event.status));
        if (!this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
        return;
      }
      case 'function_call':
        this.toolsRunning++;
        this.toolChain = this.toolChain.then(() => this.runTool(model, event)).finally(() => {
          this.toolsRunning--;
          this.renewIfQuiet(false);
        });
        return;
      case 'transcript_done':
        if (event.role === 'assistant' && event.transcript !== '') this.emit(callEvents.agentSaid(event.responseId, event.transcript));
        return;
      case 'session_expiring':
        this.onExpiring(event.remainingMs);
        return;
      case 'disconnected':
        this.onModelDisconnected(event);
        return;
      case 'error': {
        this.log.debug('model error', { code: event.code, message: event.message, provider_code: event.providerCode });
        // A result's response that will never be created: not spoken, so it is said again when idle.
        const dropped = event.tag === undefined ? undefined : this.deliveries.find((w) => w.tag === event.tag && w.responseId === undefined);
        if (dropped !== undefined) {
          dropped.fail();
          // Said again at the next quiet moment; if the line is quiet already, no event will say
          // so, so look again shortly (once per drop, so a model that keeps refusing is not hammered).
          this.offerAgainSoon();
        }
        return;
      }
      default:
        return;
    }
  }

  /** Barge-in: the model's response is cancelled (client or server), playout cleared, item truncated. */
  private onSpeechStarted(event: Extract<RealtimeEvent, { type: 'speech_started' }>): void {
    this.agent.callerSpeaking = true;
    const cleared = this.clearPlayout();
    const speaking = this.activeResponseId !== undefined || cleared !== null;
    if (this.activeResponseId !== undefined) this.silenced.add(this.activeResponseId);
    this.emit(callEvents.callerSpeech('started'));
    if (speaking) {
      this.emit(callEvents.bargeIn(event.interruption?.itemId ?? cleared?.itemId, event.interruption?.playedMs ?? cleared?.sentMs, cleared?.droppedMs ?? 0));
    }
  }

  private idle(): void {
    if (this.ending) return;
    this.options.delivery.onIdle(this.sessionId).catch((error: unknown) => this.log.warn('delivery on idle failed', { error }));
    this.renewIfQuiet(false);
  }

  private async runTool(model: RealtimeSession, event: Extract<RealtimeEvent, { type: 'function_call' }>): Promise<void> {
    const before = this.agent.activeAgent;
    let output: ToolOutput;
    try {
      output = await this.options.runtime.handle(this.agent, { callId: event.callId, name: event.name, arguments: event.arguments, responseId: event.responseId }, this.control());
    } catch (error) {
      this.log.error('tool call failed', { tool: event.name, call_id: event.callId, error });
      output = toolError(error);
    }
    const operationId = typeof output.operation_id === 'string' ? output.operation_id : undefined;
    this.emit(callEvents.toolCall(event.name, event.callId, output.status, operationId));
    // The output goes to the session that asked; a re-opened session never saw the call.
    if (model === this.model && !this.ending) model.sendToolOutput(event.callId, output);
    const after = this.agent.activeAgent;
    if (after !== before && model === this.model && !this.ending) {
      this.emit(callEvents.agentChanged(before, after));
      // The new agent learns what the call is waiting for: operations belong to the call, not the agent.
      const context = `The call was handed to you by the ${before} agent.\n${this.agent.pendingSummary(await this.operationStates())}`;
      await model.configure(this.sessionConfig(after, context)).catch((error: unknown) => this.log.warn('reconfiguring the model after a handoff failed', { error }));
    }
  }

  private control(): CallControl {
    return {
      transfer: async () => {
        const target = this.options.call.tenant.transferTarget;
        if (target === undefined) return { ok: false, detail: 'no transfer target configured' };
        const outcome = await this.options.call.dialog.transfer(target).catch((error: unknown) => ({ type: 'failed' as const, status: 500, reason: error instanceof Error ? error.message : String(error) }));
        this.emit(callEvents.transfer(target, outcome));
        // A refused REFER keeps the call: the agent apologises and goes on.
        return outcome.type === 'succeeded' ? { ok: true, detail: target } : { ok: false, detail: `${target}: ${outcome.status} ${outcome.reason}` };
      },
    };
  }

  /**
   * A lost model session: the caller hears the apology prompt at once (nothing else can speak),
   * and a new session is opened with the call's summary while it plays. A second loss, or a
   * re-open that fails, ends the call with the goodbye prompt; pending results go out of band.
   */
  private onModelDisconnected(event: Extract<RealtimeEvent, { type: 'disconnected' }>): void {
    if (this.ending || this.sayingGoodbye || event.reason === 'closed' || event.reason === 'aborted') return;
    if (this.opening) {
      // The session's connect or configure fails with this loss, and whoever opened it decides:
      // start() ends the call, a re-open says goodbye. Re-opening here too would do both.
      this.emit(callEvents.modelDisconnected(event.reason, event.detail, false));
      this.log.warn('model session lost while it was being opened', { reason: event.reason, detail: event.detail });
      return;
    }
    const planned = event.reason === 'session_limit';
    const willReopen = planned || this.reopens < MAX_MODEL_REOPENS;
    this.emit(callEvents.modelDisconnected(event.reason, event.detail, willReopen));
    this.log.warn('model session lost', { reason: event.reason, detail: event.detail, reopen: willReopen });
    // A renewal in progress is moot: the re-open below carries the same summary.
    if (this.renewal !== undefined) {
      clearTimeout(this.renewal.timer);
      void this.renewal.standby?.then((standby) => standby?.close());
      this.renewal = undefined;
    }
    // Responses of the lost session never finish: what was being said is said again later.
    this.leaveModelSession();
    if (!willReopen) {
      void this.endWithGoodbye();
      return;
    }
    if (!planned) this.reopens++;
    void this.playPrompt('reconnecting');
    const cause = planned ? 'expiring' : 'lost';
    this.modelReady = this.openModel(true);
    void this.modelReady.then((ok) => {
      callMetrics.modelReopens.inc({ cause, outcome: ok ? 'ok' : 'failed' });
      if (!ok && !this.ending) return this.endWithGoodbye();
      return undefined;
    });
  }

  private async endWithGoodbye(): Promise<void> {
    if (this.ending || this.sayingGoodbye) return;
    this.sayingGoodbye = true;
    this.clearPlayout();
    await this.playPrompt('goodbye');
    await this.end('model_lost');
  }

  // ---- result delivery -------------------------------------------------------------------------

  private port(): ConversationPort {
    return {
      deliver: async ({ operationId, message }, stop) => {
        if (!(await this.modelReady) || this.ending || this.model === undefined) return { status: 'failed' };
        if (stop?.aborted === true) return { status: 'cancelled' };
        const model = this.model;
        const spoken = new SpokenResponse({ operationId, tag: `deliver:${operationId}:${++this.deliverySeq}`, now: Date.now });
        this.deliveries.push(spoken);
        // A hold only delays the playout (the audio waits for the resume): the bound starts again.
        const expire = (): void => {
          if (this.agent.callerOnHold && !this.ending) timer = setTimeout(expire, DELIVERY_TIMEOUT_MS);
          else spoken.fail();
        };
        let timer = setTimeout(expire, DELIVERY_TIMEOUT_MS);
        // Cut as a barge-in cuts (its audio silenced, the playout cleared), and not told.
        stop?.addEventListener(
          'abort',
          () => {
            if (spoken.responseId !== undefined) this.silenced.add(spoken.responseId);
            this.clearPlayout();
            spoken.cut();
          },
          { once: true },
        );
        model.addSystemMessage(message);
        model.createResponse({ tag: spoken.tag });
        const result = await spoken.outcome;
        clearTimeout(timer);
        const index = this.deliveries.indexOf(spoken);
        if (index >= 0) this.deliveries.splice(index, 1);
        this.emit(callEvents.resultSpoken(operationId, result.status, result.responseId));
        // Settled by its playout after the response was done: the line may be quiet now.
        if (!this.agent.callerSpeaking && !this.agent.responseActive) this.renewIfQuiet(false);
        return result;
      },
    };
  }

  // ---- signaling and media -------------------------------------------------------------------

  private onDialog(event: DialogEvent): void {
    switch (event.type) {
      case 'dtmf':
        if (/^[0-9A-D*#]$/.test(event.digit)) this.rtp?.injectDigit(event.digit as DtmfDigit, event.durationMs);
        return;
      case 'ack':
        // A delayed offer: the ACK's answer settles the media that the provisional choice stood in for.
        if (event.media === undefined) return;
        if (this.rtp === undefined) return;
        this.rtp.setRemote(event.media.remote);
        applyDirection(this.rtp, event.media);
        this.applyHold(event.media);
        this.applyCodec(event.media);
        return;
      case 'reinvite':
        if (this.rtp === undefined) return;
        this.rtp.setRemote(event.media.remote);
        applyDirection(this.rtp, event.media);
        this.applyHold(event.media);
        this.applyCodec(event.media);
        return;
      case 'ended':
        void this.end(endReasonOf(event.reason), event.reason);
        return;
      default:
        return;
    }
  }

  /**
   * The caller holds the call when our answer may not send (they offered sendonly or inactive, or
   * the hold address): the gate then holds results rather than speak them unheard, and the resume
   * offers them at once, measured from the resume (test/scenarios/result-during-hold.test.ts).
   */
  private applyHold(media: NegotiatedMedia): void {
    const onHold = !(media.direction === 'sendrecv' || media.direction === 'sendonly');
    if (onHold === this.agent.callerOnHold) return;
    this.agent.callerOnHold = onHold;
    if (!onHold) this.agent.resumedAt = Date.now();
    this.emit(callEvents.hold(onHold ? 'held' : 'resumed'));
    this.log.info(onHold ? 'caller holds the call' : 'caller resumed the call', { direction: media.direction });
    if (!onHold && !this.agent.callerSpeaking && !this.agent.responseActive) this.idle();
  }

  /**
   * A re-INVITE that changed the codec switches the live RTP session; the model keeps the format
   * it was configured with (changing it would mean a new session), so the media layer transcodes
   * from here on where it passed G.711 through before. Costs CPU, keeps the call and its context.
   */
  private applyCodec(media: NegotiatedMedia): void {
    const rtp = this.rtp;
    if (rtp === undefined || media.codec === this.wireCodec?.codec && media.payloadType === this.wireCodec.payloadType) return;
    const from = this.wireCodec?.codec ?? 'PCMU';
    rtp.setCodec({ codec: wireCodec(media.codec, media.payloadType), ...(media.telephoneEvent !== undefined && { telephoneEventPayloadType: media.telephoneEvent.payloadType }) });
    this.wireCodec = { codec: media.codec, payloadType: media.payloadType };
    const passthrough = (media.codec === 'PCMU' && this.modelFormat === 'pcmu') || (media.codec === 'PCMA' && this.modelFormat === 'pcma');
    this.emit(callEvents.codecChanged(from, media.codec, passthrough));
    this.log.info('codec changed by re-INVITE', { from, to: media.codec, payload_type: media.payloadType, passthrough });
  }

  private onMedia(event: RtpSessionEvent): void {
    switch (event.type) {
      case 'audio':
        this.audioBatch.push(event.audio);
        if (this.audioBatch.length * FRAME_MS >= MODEL_AUDIO_BATCH_MS) this.flushAudio();
        return;
      case 'dtmf':
        this.emit(callEvents.dtmf(event.digit, event.source));
        this.answerOwedSince = Date.now();
        this.flushAudio();
        this.model?.sendDtmf(event.digit);
        return;
      case 'item-started':
        for (const spoken of this.deliveries) spoken.sent(event.itemId);
        return;
      case 'item-played': {
        this.playing.delete(event.itemId);
        for (const spoken of [...this.deliveries]) spoken.finished(event.itemId, event.sentMs);
        const prompt = this.promptWaiters.get(event.itemId);
        if (prompt !== undefined) prompt();
        this.renewIfQuiet(false);
        return;
      }
      case 'media-timeout':
        this.log.warn('no media from the caller', { reason: event.reason, silent_ms: event.silentMs });
        void this.end('media_timeout');
        return;
      default:
        return;
    }
  }

  // ---- the end ---------------------------------------------------------------------------------

  private reject(status: number, reason: string): false {
    this.options.call.reject(status, reason);
    callMetrics.ended.inc({ tenant: this.options.call.tenant.id, reason: 'rejected' });
    this.emit(callEvents.rejected(status, reason));
    this.log.info('call rejected', { status, reason });
    return false;
  }

  private end(reason: CallEndReason, dialogReason?: DialogEndReason): Promise<void> {
    if (this.ended === undefined) {
      this.ending = true;
      // Deferred a tick: the BYE sent by finish() ends the dialog synchronously, and that
      // 'ended' event must find this call already ending with its first reason.
      this.ended = Promise.resolve().then(() => this.finish(reason, dialogReason));
    }
    return this.ended;
  }

  /**
   * Hang-up from either side: model closed, media released, registry entry closed, and delivery
   * told the call is over (results still owed go out of band, once).
   */
  private async finish(reason: CallEndReason, dialogReason: DialogEndReason | undefined): Promise<void> {
    const dialog = this.options.call.dialog;
    if (dialog.state !== 'terminated') {
      await Promise.race([dialog.hangup().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, HANGUP_TIMEOUT_MS).unref())]);
    }
    for (const spoken of this.deliveries.splice(0)) spoken.fail();
    this.abort.abort();
    if (this.renewal !== undefined) {
      clearTimeout(this.renewal.timer);
      void this.renewal.standby?.then((standby) => standby?.close());
      this.renewal = undefined;
    }
    for (const resolve of this.promptWaiters.values()) resolve();
    this.promptWaiters.clear();
    const tenant = this.options.call.tenant.id;
    callMetrics.ended.inc({ tenant, reason });
    if (this.answeredAt !== undefined) {
      callMetrics.active.dec({ tenant });
      observeWithExemplar(callMetrics.durationSeconds, { reason }, (performance.now() - this.answeredAt) / 1000, { session_id: this.sessionId });
    }
    await Promise.allSettled([this.model?.close(), this.rtp?.close()]);
    // A tool call that was being admitted when the caller hung up is owned before delivery looks.
    await Promise.race([this.toolChain, new Promise((resolve) => setTimeout(resolve, TOOL_SETTLE_MS).unref())]);
    const phase = reason === 'transferred' ? 'transferred' : 'hung_up';
    await this.options.registry.close(this.sessionId, reason).catch((error: unknown) => this.log.warn('session registry close failed', { error }));
    await this.options.delivery.onCallEnded(this.sessionId, phase).catch((error: unknown) => this.log.error('out-of-band hand-over failed', { error }));
    this.log.info('call ended', { reason, dialog_reason: dialogReason, operations: this.agent.operations.size });
    this.emit(callEvents.ended(reason, dialogReason));
  }

  private emit(event: CallEvent): void {
    const at = Date.now();
    if (event.type !== 'rejected') {
      this.options.registry.appendEvent(this.sessionId, event, at).catch((error: unknown) => this.log.debug('call event not recorded', { error }));
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

function endReasonOf(reason: DialogEndReason): CallEndReason {
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

/**
 * RFC 3264 §6.1 from the media's side: RTP goes to the caller only when our answer sends
 * (sendrecv, sendonly), and no media timeout runs while the caller sends nothing by agreement
 * (it holds the call, or our answer is sendonly or inactive).
 */
function applyDirection(rtp: RtpSession, media: NegotiatedMedia): void {
  rtp.setSending(media.direction === 'sendrecv' || media.direction === 'sendonly');
  rtp.setHold(media.held || media.direction === 'sendonly' || media.direction === 'inactive');
}
