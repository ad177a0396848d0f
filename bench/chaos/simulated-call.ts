/**
 * One simulated call in a chaos gateway: an AgentSession that asks for its plan's tools through the
 * real tool runtime, and a conversation port that plays results to the "caller" and journals what
 * was heard. A result counts as heard once its essential part played uncut (all but its last
 * TOLD_TAIL_MS: the port's deliver resolves completed there while the tail plays on), the same rule
 * the real call session follows; a barge-in, a stall or the hang-up before that point cuts it.
 */
import { AgentSession } from '../../agents/agent-session.ts';
import type {
  ConversationPort,
  ResultDelivery,
  SpokenOutcome,
} from '../../agents/result-delivery.ts';
import { toolError, type ToolRuntime } from '../../agents/tool-runtime.ts';
import { TOLD_TAIL_MS } from '../../gateway/call/spoken-response.ts';
import type { CallPlan } from './call-plan.ts';
import type { CallJournal } from './journal.ts';
import { SeededRandom } from './seeded-random.ts';

/** How long saying one result takes: a sentence or two of speech. */
const SPEAK_MIN_MS = 400;
const SPEAK_MAX_MS = 1_500;
/** A caller who barges in talks for this long before the line is quiet again. */
const BARGE_IN_TALK_MS = 600;
/**
 * A backstop: a quiet call offers held results again this often. The call session does so at its
 * idle moments (a response ended, the caller stopped talking), which deliver() and the barge-in
 * end reproduce; this catches results that arrived while the line was busy and nothing ended since.
 */
const IDLE_OFFER_MS = 1_000;

export interface SimulatedCallParts {
  readonly runtime: ToolRuntime;
  readonly delivery: Pick<ResultDelivery, 'attach' | 'onIdle' | 'onCallEnded'>;
  readonly journal: CallJournal;
  readonly gatewayId: string;
  /** rtp.stallCutMs: a stall this long cuts the speech, as the media does on a real call. */
  readonly stallCutMs: number;
  readonly onError: (what: string, error: unknown) => void;
}

export class SimulatedCall implements ConversationPort {
  readonly session: AgentSession;
  private readonly random: SeededRandom;
  private readonly hangUp = new AbortController();
  private toolCalls = 0;
  private responses = 0;
  /** Results being played now: the response is active until the last of them ends. */
  private playing = 0;

  constructor(
    private readonly plan: CallPlan,
    private readonly parts: SimulatedCallParts,
  ) {
    this.random = new SeededRandom(plan.seed);
    this.session = new AgentSession({
      sessionId: plan.sessionId,
      tenantId: plan.tenantId,
      caller: plan.caller,
      ownerGateway: parts.gatewayId,
      agent: plan.agent,
      responseActive: () => this.playing > 0,
    });
  }

  /** Runs the call to its end: the tool calls of each intent, the stay on the line, the hang-up. */
  async run(stopping: AbortSignal): Promise<void> {
    const { delivery, journal } = this.parts;
    delivery.attach(this.session, this);
    journal.append({
      type: 'call_started',
      at: Date.now(),
      sessionId: this.plan.sessionId,
      tenantId: this.plan.tenantId,
      gatewayId: this.parts.gatewayId,
    });
    const idle = setInterval(() => this.offerHeld(), IDLE_OFFER_MS);
    try {
      for (const intent of this.plan.intents) {
        for (const step of intent.steps) {
          if (stopping.aborted) break;
          await sleep(step.delayMs, stopping);
          this.session.turnId++;
          const call = {
            callId: `fc_${this.plan.sessionId}_${++this.toolCalls}`,
            name: step.tool,
            arguments: step.arguments,
          };
          // As the call session does: a tool that throws (Redis away) answers an error and the call goes on.
          const output = await this.parts.runtime
            .handle(this.session, call)
            .catch((error: unknown) => toolError(error));
          journal.append({
            type: 'tool_answered',
            at: Date.now(),
            sessionId: this.plan.sessionId,
            intentId: intent.intentId,
            tool: step.tool,
            status: output.status,
            ...(typeof output.operation_id === 'string' && { operationId: output.operation_id }),
          });
        }
      }
      await sleep(this.plan.stayMs, stopping);
    } finally {
      clearInterval(idle);
      this.hangUp.abort();
      await this.parts.delivery
        .onCallEnded(this.plan.sessionId, 'hung_up')
        .catch((error: unknown) => this.parts.onError('out-of-band hand-over', error));
      journal.append({
        type: 'call_ended',
        at: Date.now(),
        sessionId: this.plan.sessionId,
        phase: 'hung_up',
      });
    }
  }

  async deliver(
    result: { readonly operationId: string; readonly message: string },
    stop?: AbortSignal,
  ): Promise<SpokenOutcome> {
    const responseId = `resp_${this.plan.sessionId}_${++this.responses}`;
    const speakMs = this.random.int(SPEAK_MIN_MS, SPEAK_MAX_MS);
    const bargeIn = this.random.chance(this.plan.bargeInChance);
    this.playing++;
    const firstAudioAt = Date.now();
    const playout = playOut(speakMs, {
      signal: stop === undefined ? this.hangUp.signal : AbortSignal.any([this.hangUp.signal, stop]),
      stallCutMs: this.parts.stallCutMs,
      ...(bargeIn && { bargeInAtMs: Math.floor(speakMs / 2) }),
    });
    const essential = await playout.essential;
    const status: SpokenOutcome['status'] =
      essential === 'played'
        ? 'completed'
        : stop?.aborted === true || essential === 'stalled' || essential === 'barged_in'
          ? 'cancelled'
          : 'failed';
    // Durable before delivery hears of it: what the caller heard is recorded even if this process dies next.
    this.parts.journal.append({
      type: 'result_played',
      at: Date.now(),
      sessionId: this.plan.sessionId,
      operationId: result.operationId,
      status,
    });
    // The response stays active until the tail has played (or been cut), after deliver resolved.
    void playout.ended.then((end) => {
      this.playing--;
      if (end === 'barged_in' || status === 'cancelled') this.callerTalksOver();
      // The response ended and the line is quiet: the call session goes idle here (response done).
      else setImmediate(() => this.offerHeld());
    });
    return { status, responseId, firstAudioAt };
  }

  /** The caller barged in: they talk for a while, then the line is quiet again. */
  private callerTalksOver(): void {
    this.session.callerSpeaking = true;
    setTimeout(() => {
      this.session.callerSpeaking = false;
      this.offerHeld();
    }, BARGE_IN_TALK_MS).unref();
  }

  /** The line is quiet: results held for later are offered again. */
  private offerHeld(): void {
    if (this.hangUp.signal.aborted || this.session.callerSpeaking || this.session.responseActive)
      return;
    this.parts.delivery
      .onIdle(this.plan.sessionId)
      .catch((error: unknown) => this.parts.onError('delivery on idle', error));
  }
}

/** Audio goes out in frames of this length; a frame that comes a stall late is where the media cuts. */
const FRAME_MS = 100;

/** How a playout stopped: to its end, the hang-up or a stop, a stall, or the caller talking over it. */
type PlayoutEnd = 'played' | 'aborted' | 'stalled' | 'barged_in';

interface PlayoutOptions {
  readonly signal: AbortSignal;
  readonly stallCutMs: number;
  /** The caller talks over the speech once this much of it has played. */
  readonly bargeInAtMs?: number;
}

interface SimulatedPlayout {
  /** `played` once all but the last TOLD_TAIL_MS went out, else how it stopped before that. */
  readonly essential: Promise<PlayoutEnd>;
  /** How the whole playout stopped, tail included. */
  readonly ended: Promise<PlayoutEnd>;
}

/**
 * Plays `ms` of speech frame by frame, as the media sends it: a process paused mid-speech resumes
 * where it was, not at the end, and a stall of `stallCutMs` or more cuts the rest (RtpSession).
 * Its essential part is played once the frames sent cover all but the last TOLD_TAIL_MS (at least
 * one frame); a cut after that point cuts only the tail.
 */
function playOut(ms: number, options: PlayoutOptions): SimulatedPlayout {
  let reachEssential: (end: PlayoutEnd) => void = () => undefined;
  const essential = new Promise<PlayoutEnd>((resolve) => (reachEssential = resolve));
  const essentialMs = Math.max(0, ms - TOLD_TAIL_MS);
  const ended = (async (): Promise<PlayoutEnd> => {
    const stopAtMs = Math.min(ms, options.bargeInAtMs ?? ms);
    for (let sent = 0; sent < stopAtMs;) {
      const frameMs = Math.min(FRAME_MS, stopAtMs - sent);
      const before = Date.now();
      if (!(await sleep(frameMs, options.signal))) return 'aborted';
      if (Date.now() - before - FRAME_MS >= options.stallCutMs) return 'stalled';
      sent += frameMs;
      if (sent >= essentialMs) reachEssential('played');
    }
    return stopAtMs < ms ? 'barged_in' : 'played';
  })();
  // A promise settles once: a cut after the essential end leaves it played.
  void ended.then(reachEssential);
  return { essential, ended };
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
