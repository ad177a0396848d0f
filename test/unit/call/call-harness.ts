/**
 * A CallSession driven without sockets or real time: fakes of the dialog, the media and the model
 * ports, a fake of the delivery side that keeps the ConversationPort the call attaches (the port
 * the ledger's record of "told" depends on), and a manual clock. Each step of a race is an event
 * the test sends; `settle()` lets the promises it started run.
 */
import type { Clock, ClockHandle } from '../../../config/clock.ts';
import { Logger } from '../../../config/log.ts';
import { rtpSchema, tenantSchema } from '../../../config/schema.ts';
import { exampleCatalogue } from '../../support/example-agents.ts';
import type { AgentCatalogue } from '../../../agents/agent.ts';
import type { AgentSession } from '../../../agents/agent-session.ts';
import type { ConversationPort, SpokenOutcome } from '../../../agents/result-delivery.ts';
import { CallSession, type CallRtp } from '../../../gateway/call/call-session.ts';
import type { CallEvent } from '../../../gateway/call/call-events.ts';
import type { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import type { PlayoutClearResult } from '../../../gateway/media/playout.ts';
import type { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import type { RtpSessionEvent } from '../../../gateway/media/rtp-session-events.ts';
import type { SessionOptions } from '../../../gateway/realtime/realtime-model.ts';
import type {
  RealtimeEvent,
  RealtimeSession,
  ResponseHandle,
  ResponseRequest,
  SessionConfig,
} from '../../../gateway/realtime/realtime-session.ts';
import { RequestedResponse } from '../../../gateway/realtime/response-handle.ts';
import { buildOffer, type NegotiatedMedia } from '../../../gateway/sip/sdp-negotiation.ts';
import type {
  DialogEvent,
  DialogEventListener,
  InboundCall,
  SignalingDialog,
} from '../../../gateway/sip/signaling-driver.ts';

/** One RTP packet of audio. */
const PACKET_MS = 20;

/** Wall-clock time of the manual clock's zero. */
export const EPOCH_MS = 1_800_000_000_000;

/** A clock that moves only when told; due callbacks fire in time order. */
export class ManualClock implements Clock {
  private current = 0;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { readonly at: number; readonly callback: () => void }
  >();

  now(): number {
    return this.current;
  }

  epochMs(): number {
    return EPOCH_MS + this.current;
  }

  schedule(callback: () => void, delayMs: number): ClockHandle {
    const id = this.nextId++;
    this.pending.set(id, { at: this.current + Math.max(0, delayMs), callback });
    return { id };
  }

  cancel(handle: ClockHandle): void {
    this.pending.delete(handle.id);
  }

  /**
   * Lets what the last step started run at the present time, then moves time on by `ms`, firing
   * what falls due (each callback's promises run at its own time).
   */
  async advance(ms: number): Promise<void> {
    await settle();
    const until = this.current + ms;
    for (;;) {
      const due = [...this.pending.entries()]
        .filter(([, timer]) => timer.at <= until)
        .sort(([, a], [, b]) => a.at - b.at)[0];
      if (due === undefined) break;
      this.pending.delete(due[0]);
      this.current = Math.max(this.current, due[1].at);
      due[1].callback();
      await settle();
    }
    this.current = until;
    await settle();
  }
}

/** Lets every promise chain the last step started run to its next wait. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface FakeItem {
  readonly itemId: string;
  queuedMs: number;
  sentMs: number;
  ended: boolean;
  started: boolean;
}

/** The call's RTP session: the test says when packets of an item go out. */
export class FakeRtp implements CallRtp {
  readonly localAddress = '127.0.0.1';
  readonly localPort = 40_000;
  sending = true;
  private readonly listeners = new Set<(event: RtpSessionEvent) => void>();
  private readonly items: FakeItem[] = [];
  closed = false;

  on(listener: (event: RtpSessionEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  setRemote(): void {}
  setSending(sending: boolean): void {
    this.sending = sending;
  }
  setHold(): void {}
  setCodec(): void {}
  /** What setSrtp() was given, in order (SRTP keys, or undefined for plain RTP). */
  readonly srtp: unknown[] = [];
  setSrtp(keys: unknown): void {
    this.srtp.push(keys);
  }
  injectDigit(): void {}

  /** 8 bytes per ms (G.711). */
  play(itemId: string, audio: Buffer): void {
    let item = this.items.find((i) => i.itemId === itemId);
    if (item === undefined) {
      item = { itemId, queuedMs: 0, sentMs: 0, ended: false, started: false };
      this.items.push(item);
    }
    item.queuedMs += audio.length / 8;
  }

  endItem(itemId: string): void {
    const item = this.items.find((i) => i.itemId === itemId);
    if (item !== undefined) item.ended = true;
  }

  clear(): PlayoutClearResult | null {
    const playing = this.items[0];
    const droppedMs = this.items.reduce((sum, item) => sum + item.queuedMs - item.sentMs, 0);
    this.items.length = 0;
    return playing === undefined
      ? null
      : { itemId: playing.itemId, sentMs: playing.sentMs, droppedMs };
  }

  playedMs(itemId: string): number | undefined {
    return this.items.find((i) => i.itemId === itemId)?.sentMs;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** Packets of the item at the head of the queue go out, `ms` of them (the first one announces it). */
  send(ms: number): void {
    const item = this.items[0];
    if (item === undefined || !this.sending) return;
    if (!item.started) {
      item.started = true;
      this.emit({ type: 'item-started', itemId: item.itemId });
    }
    item.sentMs = Math.min(item.queuedMs, item.sentMs + ms);
    if (item.ended && item.sentMs >= item.queuedMs) {
      this.items.shift();
      this.emit({ type: 'item-played', itemId: item.itemId, sentMs: item.sentMs });
    }
  }

  /** The process stalled `gapMs` with audio queued: the media drops it all, as RtpSession does. */
  stall(gapMs: number): void {
    const cleared = this.clear();
    if (cleared !== null) this.emit({ type: 'playout-stalled', gapMs, cleared });
  }

  /** Sends the head item to its end. */
  sendAll(): void {
    const item = this.items[0];
    if (item !== undefined) this.send(item.queuedMs - item.sentMs);
  }

  get queued(): readonly string[] {
    return this.items.map((item) => item.itemId);
  }

  private emit(event: RtpSessionEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

/**
 * One model session: records what the call asked of it; the test sends its events. Each request
 * gets a handle as the sequencer gives one: created by `speak`, done by `done`, refused by
 * `refuse`, settled on close.
 */
export class FakeModelSession implements RealtimeSession {
  readonly requests: ResponseRequest[] = [];
  /** The handle of each request, in order (the greeting's first). */
  readonly handles: RequestedResponse[] = [];
  /** The handle the tool outputs sent so far are spoken by, until a response takes it. */
  toolOutputHandle: RequestedResponse | undefined;
  /** Handles whose response was created. */
  private readonly running: RequestedResponse[] = [];
  readonly systemMessages: string[] = [];
  readonly truncated: { readonly itemId: string; readonly playedMs: number }[] = [];
  readonly audio: Buffer[] = [];
  /** Each configuration the call gave the session, in order. */
  readonly configurations: SessionConfig[] = [];
  /** What the call opened the session with (its model). */
  openedWith: SessionOptions | undefined;
  closed = false;
  /** As the sequencer answers it: from response_created until the listeners of its response_done ran. */
  activeResponseId: string | undefined;
  private readonly listeners = new Set<(event: RealtimeEvent) => void>();

  async connect(): Promise<void> {}
  async configure(config: SessionConfig): Promise<void> {
    this.configurations.push(config);
  }
  sendAudio(audio: Buffer): void {
    this.audio.push(audio);
  }
  commitAudio(): void {}
  clearAudio(): void {}
  /** How many times the call cancelled the active response. */
  cancels = 0;
  cancelResponse(): void {
    this.cancels++;
  }
  async cancelAndWait(): Promise<void> {}
  truncate(itemId: string, playedMs: number): void {
    this.truncated.push({ itemId, playedMs });
  }
  sendToolOutput(): ResponseHandle {
    this.toolOutputHandle ??= new RequestedResponse();
    return this.toolOutputHandle;
  }
  createResponse(request?: ResponseRequest): ResponseHandle {
    const handle = new RequestedResponse();
    this.requests.push(request ?? {});
    this.handles.push(handle);
    if (this.closed) handle.markRefused('not_connected');
    return handle;
  }
  addSystemMessage(text: string): void {
    this.systemMessages.push(text);
  }
  sendDtmf(): void {}
  async close(): Promise<void> {
    this.closed = true;
    const open = [...this.handles, ...this.running, this.toolOutputHandle];
    for (const handle of open) handle?.markClosed();
  }
  on(): () => void {
    return () => undefined;
  }
  onAny(listener: (event: RealtimeEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** As the real session: a handle hears of its response before the call's listeners do. */
  emit(event: RealtimeEvent): void {
    if (event.type === 'response_created') this.activeResponseId = event.responseId;
    // The real session's sequencer stops before its disconnected goes out.
    if (event.type === 'disconnected') this.activeResponseId = undefined;
    for (const listener of [...this.listeners]) listener(event);
    if (event.type === 'response_done') {
      if (this.activeResponseId === event.responseId) this.activeResponseId = undefined;
      for (const handle of this.handlesOf(event.responseId)) handle.markDone(event.status);
    }
  }

  /** The handle of the last response asked for (a result's, once one was asked to be spoken). */
  get lastHandle(): RequestedResponse | undefined {
    return this.handles.at(-1);
  }

  /**
   * The model starts a response and streams `ms` of audio of one item for it: the one `handle`
   * asked for, or, without one, a response of its own (which speaks tool outputs sent before).
   */
  speak(responseId: string, itemId: string, ms: number, handle?: RequestedResponse): void {
    const answers = handle ?? this.toolOutputHandle;
    if (handle === undefined) this.toolOutputHandle = undefined;
    if (answers !== undefined) {
      answers.markCreated(responseId);
      this.running.push(answers);
    }
    this.emit({ type: 'response_created', responseId });
    answers?.markItem(itemId);
    this.emit({ type: 'audio_delta', responseId, itemId, audio: Buffer.alloc(ms * 8) });
  }

  done(responseId: string, status: 'completed' | 'cancelled' = 'completed'): void {
    this.emit({ type: 'response_done', responseId, status, callIds: [] });
  }

  private handlesOf(responseId: string): RequestedResponse[] {
    return this.running.filter((handle) => handle.responseId === responseId);
  }
}

export class FakeDialog implements SignalingDialog {
  readonly id = 'dialog-1';
  readonly callId = 'sip-call-1';
  readonly media: NegotiatedMedia | undefined = undefined;
  state: SignalingDialog['state'] = 'confirmed';
  private readonly listeners = new Set<DialogEventListener>();

  on(listener: DialogEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Our BYE: the dialog ends at once, as the real one does. */
  async hangup(): Promise<void> {
    this.end('local-bye');
  }

  async transfer(): Promise<{
    readonly type: 'failed';
    readonly status: number;
    readonly reason: string;
  }> {
    return { type: 'failed', status: 501, reason: 'not in this test' };
  }

  async reinvite(): Promise<NegotiatedMedia> {
    return negotiated('sendrecv');
  }

  emit(event: DialogEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  /** A re-INVITE from the caller; `recvonly` is our answer to their hold (sendonly). */
  reinviteFromCaller(direction: NegotiatedMedia['direction']): void {
    // The call reads the negotiated media; the offer is only carried along.
    const offer = buildOffer({
      preference: ['PCMU'],
      local: { address: '127.0.0.2', port: 30_000 },
      sessionId: '1',
      sessionVersion: 1,
    });
    this.emit({ type: 'reinvite', media: negotiated(direction), offer });
  }

  /** The caller hangs up (BYE). */
  callerHangsUp(): void {
    this.end('remote-bye');
  }

  private end(reason: 'remote-bye' | 'local-bye'): void {
    if (this.state === 'terminated') return;
    this.state = 'terminated';
    this.emit({ type: 'ended', reason });
  }
}

export function negotiated(direction: NegotiatedMedia['direction']): NegotiatedMedia {
  return {
    codec: 'PCMU',
    payloadType: 0,
    clockRate: 8000,
    channels: 1,
    ptime: 20,
    remote: { address: '127.0.0.2', port: 30_000 },
    direction,
    held: direction !== 'sendrecv' && direction !== 'sendonly',
  };
}

/** The delivery side as the call sees it: the port it attached, and when it was told the line is idle or the call ended. */
export class FakeDelivery {
  port: ConversationPort | undefined;
  session: AgentSession | undefined;
  readonly idleAt: number[] = [];
  readonly callEnded: { readonly phase: string; readonly at: number }[] = [];

  constructor(private readonly clock: ManualClock) {}

  attach(session: AgentSession, port: ConversationPort): void {
    this.session = session;
    this.port = port;
  }

  async onIdle(): Promise<void> {
    this.idleAt.push(this.clock.now());
  }

  async onCallEnded(_sessionId: string, phase: 'hung_up' | 'transferred'): Promise<void> {
    this.callEnded.push({ phase, at: this.clock.now() });
  }
}

/** A result asked to be spoken, and what the port reported for it (told: completed) and when. */
export interface Speaking {
  readonly operationId: string;
  outcome: SpokenOutcome | undefined;
  settledAt: number | undefined;
  readonly done: Promise<SpokenOutcome>;
  readonly stop: AbortController;
}

export interface CallHarness {
  readonly call: CallSession;
  readonly clock: ManualClock;
  readonly rtp: FakeRtp;
  readonly dialog: FakeDialog;
  readonly delivery: FakeDelivery;
  /** Every model session the call opened, in order. */
  readonly sessions: FakeModelSession[];
  readonly events: CallEvent[];
  /** Error lines the call logged (a refused phase change among them). */
  readonly errors: string[];
  /** The model session serving the call (the last one opened). */
  model(): FakeModelSession;
  /** Asks the call to speak a result, as delivery does after the gate said speak. */
  speak(operationId: string): Speaking;
  /** `ms` of packets go out in 20 ms frames while the clock moves with them, as the media paces them. */
  play(ms: number): Promise<void>;
  /** Whether the gate's snapshot of the call says the caller holds it. */
  gateSeesHold(): boolean;
}

export interface StartCallOptions {
  /** The agents the call is answered with (the example's by default); the entry agent is concierge. */
  readonly catalogue?: AgentCatalogue;
}

/** Answers a call and opens its model; resolves once the call is live. */
export async function startCall(options: StartCallOptions = {}): Promise<CallHarness> {
  const clock = new ManualClock();
  const rtp = new FakeRtp();
  const dialog = new FakeDialog();
  const delivery = new FakeDelivery(clock);
  const sessions: FakeModelSession[] = [];
  const events: CallEvent[] = [];
  const errors: string[] = [];
  const tenant = tenantSchema.parse({
    id: 'tenant-a',
    numbers: ['+15550100'],
    agent: 'concierge',
    trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
  });
  const inbound: InboundCall = {
    callId: dialog.callId,
    caller: { uri: 'sip:+15550111@example.test', user: '+15550111' },
    identity: { caller: '+15550111', verified: false },
    calledNumber: '+15550100',
    tenant,
    agent: 'concierge',
    headers: [],
    offer: undefined,
    source: { address: '127.0.0.2', port: 5060, transport: 'udp' },
    receivedAt: 0,
    dialog,
    accept: () => ({ ok: true, media: negotiated('sendrecv') }),
    ring: () => undefined,
    reject: () => undefined,
  };
  const call = new CallSession({
    call: inbound,
    media: {
      config: rtpSchema.parse({}),
      ports: {} as RtpPortAllocator,
      scheduler: {} as PlayoutScheduler,
      timer: clock,
      open: async () => rtp,
    },
    model: {
      openSession: (opened: SessionOptions) => {
        const session = new FakeModelSession();
        session.openedWith = opened;
        sessions.push(session);
        return session;
      },
    },
    catalogue: options.catalogue ?? exampleCatalogue(),
    runtime: {
      handle: async () => ({ status: 'ok' }),
      toolsFor: () => [],
      inlineAnswer: () => undefined,
      settleInlineAnswer: async () => undefined,
    },
    delivery,
    ledger: { get: async () => undefined },
    registry: {
      open: async () => undefined,
      close: async () => undefined,
      appendEvent: async () => undefined,
    },
    gatewayId: 'gw-unit',
    log: new Logger({ level: 'error', sink: { write: (line) => errors.push(line) } }),
    clock,
  });
  call.on((event) => events.push(event));
  const started = await call.start();
  if (!started) throw new Error('the call was not answered');
  await settle();
  const model = (): FakeModelSession => {
    const session = sessions.at(-1);
    if (session === undefined) throw new Error('no model session');
    return session;
  };
  return {
    call,
    clock,
    rtp,
    dialog,
    delivery,
    sessions,
    events,
    errors,
    model,
    speak: (operationId) => {
      const port = delivery.port;
      if (port === undefined) throw new Error('delivery was not attached');
      const stop = new AbortController();
      const done = port.deliver(
        { operationId, message: `result of ${operationId}`, output: {} },
        stop.signal,
      );
      const speaking: Speaking = {
        operationId,
        outcome: undefined,
        settledAt: undefined,
        done,
        stop,
      };
      void done.then((outcome) => {
        speaking.outcome = outcome;
        speaking.settledAt = clock.now();
      });
      return speaking;
    },
    play: async (ms) => {
      for (let played = 0; played < ms; played += PACKET_MS) {
        const step = Math.min(PACKET_MS, ms - played);
        rtp.send(step);
        await clock.advance(step);
      }
    },
    gateSeesHold: () => call.agent.snapshot('op_none', () => true).callerOnHold,
  };
}
