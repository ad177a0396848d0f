/**
 * Result delivery: a gateway reads its result streams (one per tenant) in a consumer group, runs
 * the relevance gate for each event, persists the decision on the operation and only then
 * acknowledges the event. Then it acts: speak (a system message and one response; delivered only
 * when that response finished uncancelled), keep for later (when idle, after reconciliation, until
 * the goal returns or the call ends), or send out of band.
 *
 *   ledger (COMMITTED + event, one Lua step)
 *     -> stream {t:tenant}:results:<gateway> -> XREADGROUP -> gate -> ledger.delivery -> XACK+XDEL
 *     -> speak | pending | out-of-band queue
 *
 * An event names one session: the operation's own, or a call that joined a shared (coalesced)
 * read, which gets an event of its own in its gateway's stream and a delivery record of its own.
 * A gateway that stops heartbeating is replaced by a janitor in another gateway (janitor.ts),
 * which delivers what was left in its streams out of band.
 */
import type { Redis } from 'ioredis';
import { sleep, systemClock, type Clock, type ClockHandle } from '../config/clock.ts';
import type { Logger } from '../config/log.ts';
import {
  counter,
  histogram,
  observeWithExemplar,
  SLOW_SECONDS_BUCKETS,
} from '../config/metrics.ts';
import {
  isTerminal,
  operationLogFields,
  type DeliveryRecord,
  type Operation,
} from '../jobs/ledger/operation.ts';
import type { OperationLedger, SendingDurability } from '../jobs/ledger/operation-ledger.ts';
import type { OutOfBandQueue } from '../jobs/notify/out-of-band.ts';
import type { AgentCatalogue } from './agent.ts';
import type { AgentSession } from './agent-session.ts';
import type { AuditLog } from './audit.ts';
import { decideRelevance, type RelevanceDecision, type SessionSnapshot } from './relevance-gate.ts';
import { describeForCaller, describeForModel } from './result-wording.ts';
import { holdEntry, settleEntry, type HeldEntry } from './delivery-scripts.ts';

const gateDecisions = counter({
  name: 'callgate_gate_decisions_total',
  help: 'Relevance gate decisions by decision and reason (one increment per reason).',
  labelNames: ['decision', 'reason'],
});

const lateResults = counter({
  name: 'callgate_late_results_total',
  help: 'Results that arrived after the conversation moved to another turn.',
  labelNames: ['action'],
});

const commitToAudible = histogram({
  name: 'callgate_commit_to_audible_seconds',
  help: 'From the provider commit to the first audio of the spoken acknowledgement.',
  labelNames: ['action'],
  buckets: SLOW_SECONDS_BUCKETS,
  enableExemplars: true,
});

const deliveryLag = histogram({
  name: 'callgate_result_delivery_lag_seconds',
  help: 'From the result event being written to the gate decision being persisted.',
  labelNames: ['decision'],
  buckets: SLOW_SECONDS_BUCKETS,
});

export const DELIVERY_GROUP = 'delivery';
/** The consumer under which a gateway's janitor holds the entries it took over from dead gateways. */
export function janitorConsumer(gatewayId: string): string {
  return `janitor-${gatewayId}`;
}
/**
 * How long an ended call is remembered: results that arrive later are then sent out of band as
 * "caller hung up" rather than "gateway gone"; after this the memory is freed.
 */
const ENDED_CALL_MEMORY_MS = 3_600_000;
/** Events read per stream per round; small enough that one slow round does not delay the others. */
const READ_COUNT = 50;
/** How long a blocking read waits before looking at the stop signal again. */
const BLOCK_MS = 500;

export interface SpokenOutcome {
  /** `completed`: the caller was sent all of it but its tail (TOLD_TAIL_MS); else not heard. */
  readonly status: 'completed' | 'cancelled' | 'failed';
  readonly responseId?: string;
  /** When the first packet of the response's audio was sent to the caller (ms since epoch). */
  readonly firstAudioAt?: number;
  /** How much of its audio was sent to the caller. */
  readonly heardMs?: number;
}

/** How delivery talks to a live call (implemented by the call session in the gateway). */
export interface ConversationPort {
  /**
   * Gives the model the result and asks for one response; resolves on that response's playout
   * outcome (played to the caller to its end, cut by a barge-in, or lost), not on the model's done.
   * When `stop` aborts, the response is cut where it is (as by a barge-in) and resolves `cancelled`.
   */
  deliver(
    result: {
      readonly operationId: string;
      readonly message: string;
      readonly output: Readonly<Record<string, unknown>>;
    },
    stop?: AbortSignal,
  ): Promise<SpokenOutcome>;
}

/**
 * How often delivery looks whether this process was held up (paused, starved of CPU): a tick that
 * comes much later than it should shows the gap on the monotonic clock.
 */
const PAUSE_WATCH_TICK_MS = 100;

/**
 * A record of what the caller already has (spoken, an entry settled) is written again this often
 * while Redis does not answer, for up to RECORD_RETRY_FOR_MS: longer than a restart or a failover
 * takes, so an outage does not leave a told result looking untold (and later sent again).
 */
const RECORD_RETRY_MS = 500;
const RECORD_RETRY_FOR_MS = 120_000;

/** Writes again the record that the caller heard a result (forward only: a repeat changes nothing). */
type ToldRecord = () => Promise<unknown>;

/** A write Redis answered that the replicas have not acknowledged yet (redis.durability). */
class NotDurableYet extends Error {}

export interface ResultDeliveryOptions {
  /** A connection for blocking reads. */
  readonly redis: Redis;
  /**
   * A connection for the fenced checks and settlements of entries, which must not wait behind a
   * blocking read (a check comes before every spoken result); defaults to `redis`.
   */
  readonly commands?: Redis;
  readonly ledger: OperationLedger;
  readonly gatewayId: string;
  readonly tenants: readonly string[];
  readonly catalogue: AgentCatalogue;
  readonly outOfBand: Pick<OutOfBandQueue, 'enqueue'>;
  readonly audit: AuditLog;
  readonly log: Logger;
  /** The process clock (times written on delivery records), for tests of a gateway whose clock is off. */
  readonly now?: () => number;
  /** The clock and timers delivery waits and watches with; the process's own by default. */
  readonly clock?: Clock;
  /**
   * A gap this long in the process's own run (SIGSTOP, a stalled VM) may have let a janitor take
   * over the results it held: whatever it is speaking then is cut at once, and said again only if
   * the fenced check finds it still held (else the janitor sends it out of band, and the caller
   * does not get it twice). Set below gateway.deadAfterMs by a heartbeat (deadAfterMs -
   * heartbeatMs); unset: not watched (test/integration/agents/gateway-cut-off-mid-speech.test.ts).
   */
  readonly pauseSuspectMs?: number;
  /**
   * How a record of what the caller already has (spoken, its stream entry settled) is made to
   * survive the loss of the primary (redis.durability): lost in a failover, the result would look
   * untold and go out again by message (test/integration/exactly-once/told-record-durable.test.ts).
   */
  readonly durability?: SendingDurability;
}

interface AttachedCall {
  readonly session: AgentSession;
  readonly port: ConversationPort;
  /** Results waiting for their moment (idle, the goal, the end of the call). */
  readonly pending: Set<string>;
  /** Results being spoken right now, with what cuts them: a duplicate event meanwhile is not spoken again. */
  readonly speaking: Map<
    string,
    { readonly stop: AbortController; readonly done: Promise<unknown> }
  >;
  /** Results whose stream entries a janitor took over (this gateway looked dead): never said here. */
  readonly lost: Set<string>;
}

export class ResultDelivery {
  private readonly calls = new Map<string, AttachedCall>();
  /**
   * Stream entries of results not yet delivered, by session and operation: acknowledged only once
   * that caller has the result (spoken to the end, or sent out of band), so a gateway that dies
   * before that leaves them pending for the janitor (or for itself after a restart), never lost.
   */
  private readonly unacked = new Map<string, HeldResult>();
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly now: () => number;
  private readonly commands: Redis;
  private readonly clock: Clock;
  private pauseWatch: ClockHandle | undefined;

  constructor(private readonly options: ResultDeliveryOptions) {
    this.clock = options.clock ?? systemClock;
    this.now = options.now ?? (() => this.clock.epochMs());
    this.commands = options.commands ?? options.redis;
  }

  attach(session: AgentSession, port: ConversationPort): void {
    this.calls.set(session.sessionId, {
      session,
      port,
      pending: new Set(),
      speaking: new Map(),
      lost: new Set(),
    });
  }

  async start(): Promise<void> {
    for (const tenant of this.options.tenants)
      await ensureGroup(this.options.redis, this.streamKey(tenant));
    this.running = true;
    this.loop = this.readLoop();
    this.watchForPauses();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.pauseWatch !== undefined) this.clock.cancel(this.pauseWatch);
    await this.loop;
  }

  /**
   * Cuts every result being spoken when this process finds it was held up for `pauseSuspectMs`:
   * done in the first tick after the gap, before any Redis answer, so a playout that ran on after
   * a janitor took its result over is stopped rather than finished.
   */
  private watchForPauses(): void {
    const limit = this.options.pauseSuspectMs;
    if (limit === undefined) return;
    let last = this.clock.now();
    const tick = (): void => {
      this.pauseWatch = this.clock.schedule(tick, PAUSE_WATCH_TICK_MS);
      const now = this.clock.now();
      const gap = now - last;
      last = now;
      let cut = 0;
      for (const [sessionId, call] of this.calls) {
        for (const [operationId, { stop }] of call.speaking) {
          if (stop.signal.aborted) continue;
          if (gap < limit && !this.holdLapsed(sessionId, operationId, now)) continue;
          stop.abort(
            new Error(
              'the gateway was held up or cut off from Redis; its results may have been taken over',
            ),
          );
          cut++;
        }
      }
      if (cut > 0)
        this.options.log.warn(
          'results being spoken were cut: their hold may have passed to a janitor',
          { gap_ms: Math.round(gap), cut },
        );
    };
    this.pauseWatch = this.clock.schedule(tick, PAUSE_WATCH_TICK_MS);
  }

  /**
   * Whether this gateway's hold of a result's stream entries may have run out: no hold confirmed by
   * Redis for `pauseSuspectMs` (a Redis outage, a failover, a stall), so a janitor may claim them
   * soon. A result with no entry of its own held was never claimable.
   * Pinned by test/integration/agents/gateway-cut-off-mid-speech.test.ts.
   */
  private holdLapsed(sessionId: string, operationId: string, now = this.clock.now()): boolean {
    const limit = this.options.pauseSuspectMs;
    const held = this.unacked.get(unackedKey(sessionId, operationId));
    if (
      limit === undefined ||
      !held ||
      !held.refs.some((ref) => ref.consumer === this.options.gatewayId)
    )
      return false;
    return now - held.heldAt >= limit;
  }

  streamKey(tenant: string, gatewayId = this.options.gatewayId): string {
    return this.options.ledger.keys.results(tenant, gatewayId);
  }

  private async readLoop(): Promise<void> {
    const { redis, tenants, gatewayId, log } = this.options;
    const keys = tenants.map((t) => this.streamKey(t));
    // Events read before a restart but never acknowledged come first.
    let ids = keys.map(() => '0');
    while (this.running) {
      try {
        const reply = (await redis.xreadgroup(
          'GROUP',
          DELIVERY_GROUP,
          gatewayId,
          'COUNT',
          READ_COUNT,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          ...keys,
          ...ids,
        )) as StreamReply | null;
        const drainedPending = ids.every((id) => id === '>')
          ? false
          : (reply ?? []).every(([, entries]) => entries.length === 0);
        for (const [key, entries] of reply ?? []) {
          const tenant = tenants[keys.indexOf(key)] ?? '';
          await this.processBatch(tenant, key, entries);
        }
        if (drainedPending || reply === null) ids = keys.map(() => '>');
      } catch (error) {
        if (!this.running) break;
        if (
          error instanceof Error &&
          error.message.includes('NOGROUP') &&
          (await this.recreateGroups(keys))
        ) {
          ids = keys.map(() => '0');
          continue;
        }
        log.error('result stream read failed', { error });
        await sleep(this.clock, BLOCK_MS);
      }
    }
  }

  /**
   * A janitor retired this gateway's streams while it was away (a gateway id that came back after
   * the janitor's watch window): the groups are made again from the start of each stream, so an
   * event appended meanwhile is still read. False when that failed too.
   */
  private async recreateGroups(keys: readonly string[]): Promise<boolean> {
    this.options.log.warn('result stream group missing; creating it again', {
      gateway_id: this.options.gatewayId,
    });
    try {
      for (const key of keys) await ensureGroup(this.options.redis, key);
      return true;
    } catch (error) {
      this.options.log.error('result stream group creation failed', { error });
      return false;
    }
  }

  /**
   * One read's entries: each call's in stream order, different calls at the same time, so a burst
   * of commits across many calls (a busy hour) is not told one call after another.
   */
  private async processBatch(
    tenant: string,
    key: string,
    entries: readonly [string, string[]][],
  ): Promise<void> {
    const byCall = new Map<string, { id: string; fields: Record<string, string> }[]>();
    for (const [id, raw] of entries) {
      const fields = toRecord(raw);
      const session = fields.session_id ?? '';
      const queue = byCall.get(session);
      if (queue) queue.push({ id, fields });
      else byCall.set(session, [{ id, fields }]);
    }
    const outcomes = await Promise.allSettled(
      [...byCall.values()].map(async (queue) => {
        for (const { id, fields } of queue)
          await this.processEvent(tenant, key, DELIVERY_GROUP, id, fields);
      }),
    );
    // A call whose event failed keeps it pending (unacknowledged, re-read after a restart or taken
    // over by the janitor); the other calls' results are not held back by it.
    const failed = outcomes.find(
      (outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected',
    );
    if (failed) throw failed.reason;
  }

  /**
   * Gates one result event and persists the decision; then acts. The entry is acknowledged when
   * nothing more is owed for it: at once for a duplicate or an UNKNOWN (its resolution brings its own
   * event), after the message is queued for out-of-band delivery, and after the spoken response
   * ends uncut. Speaking is not awaited here, so one call's speech never holds back another's
   * results. `gone` marks events of a gateway that died (the janitor): no call can hear them.
   * The event names the session it is for: the operation's own, or one that joined a shared read.
   */
  async processEvent(
    tenant: string,
    streamKey: string,
    group: string,
    id: string,
    fields: Readonly<Record<string, string>>,
    gone = false,
  ): Promise<void> {
    const { ledger } = this.options;
    const redis = this.commands;
    const entry: HeldEntry = {
      key: streamKey,
      group,
      consumer: gone ? janitorConsumer(this.options.gatewayId) : this.options.gatewayId,
      id,
    };
    const operationId = fields.operation_id ?? '';
    const op = await ledger.get(tenant, operationId);
    if (!op || !(isTerminal(op.state) || op.state === 'UNKNOWN')) {
      await settleEntry(redis, entry);
      return;
    }
    const sessionId = fields.session_id || op.scope.sessionId;
    const call = gone ? undefined : this.calls.get(sessionId);
    if (call?.session.answeringInline.has(op.operationId)) {
      // A tool output carries this read's result: held, and gated again when the caller has heard
      // that output (recorded as told) or did not (it is said like any result).
      this.hold(sessionId, op.operationId, entry);
      call.pending.add(op.operationId);
      return;
    }
    const decision = await this.decide(
      op,
      sessionId,
      call,
      fields.at === undefined ? undefined : Number(fields.at),
    );
    if (decision.decision === 'suppress' || decision.decision === 'reconcile_first') {
      await settleEntry(redis, entry);
      return;
    }
    this.hold(sessionId, op.operationId, entry);
    await this.act(op, sessionId, call, decision, false);
  }

  /** Keeps a stream entry unacknowledged until the session's caller has the result (see settle). */
  private hold(sessionId: string, operationId: string, ref: HeldEntry): void {
    const key = unackedKey(sessionId, operationId);
    const held = this.unacked.get(key) ?? {
      sessionId,
      operationId,
      refs: [],
      heldAt: this.clock.now(),
    };
    held.refs.push(ref);
    this.unacked.set(key, held);
  }

  /**
   * Whether this gateway still holds the result for the session (fenced in Redis: its consumer
   * still has a stream entry of it pending, whose idle time starts again). Entries a janitor took
   * over are dropped; with none left the result is lost to the janitor, which delivers it out of
   * band, and it is never said here. A result with no entry held (told from the call's own
   * memory, as at the end of a call) was never taken over.
   */
  private async owns(sessionId: string, operationId: string): Promise<boolean> {
    const call = this.calls.get(sessionId);
    if (call?.lost.has(operationId)) return false;
    const key = unackedKey(sessionId, operationId);
    const held = this.unacked.get(key);
    if (!held || held.refs.length === 0) return true;
    const sentAt = this.clock.now();
    const kept: HeldEntry[] = [];
    for (const ref of held.refs) if (await holdEntry(this.commands, ref)) kept.push(ref);
    held.refs = kept;
    if (kept.length > 0) {
      held.heldAt = sentAt;
      return true;
    }
    this.unacked.delete(key);
    call?.pending.delete(operationId);
    call?.lost.add(operationId);
    this.options.log.warn('a janitor took over a result this gateway held; it is not said here', {
      session_id: sessionId,
      operation_id: operationId,
    });
    return false;
  }

  /** `owns`, with a Redis that does not answer taken as still held: the caller has heard it, and that is recorded. */
  private async stillOwns(sessionId: string, operationId: string): Promise<boolean> {
    try {
      return await this.owns(sessionId, operationId);
    } catch (error) {
      this.options.log.warn(
        'could not confirm the hold of a result heard to the end; recorded as told',
        { session_id: sessionId, operation_id: operationId, error },
      );
      return true;
    }
  }

  /**
   * Starts the idle time of every entry this gateway's calls hold again (called with each
   * heartbeat, below the dead threshold), so the results of a live gateway never look idle to a
   * janitor, however long they wait or are spoken; entries found taken over are dropped as in
   * `owns`. Entries its janitor took over are left to idle: one whose delivery failed is claimed
   * again by a later round.
   */
  async refreshHeld(): Promise<void> {
    for (const { sessionId, operationId, refs } of [...this.unacked.values()]) {
      if (refs.some((ref) => ref.consumer === this.options.gatewayId))
        await this.owns(sessionId, operationId);
    }
  }

  /**
   * The session's caller has the result: every stream entry still held for it there is
   * acknowledged (fenced: one a janitor took over is the janitor's to settle).
   */
  private async settle(sessionId: string, operationId: string, told?: ToldRecord): Promise<void> {
    const key = unackedKey(sessionId, operationId);
    const held = this.unacked.get(key);
    const refs = [...(held?.refs ?? [])];
    // Still held (and refreshed by the heartbeat) until settled: a settle lost to a Redis outage
    // must not leave the entries to idle into a janitor's hands. The record of what the caller
    // heard goes again with them while a replica has not acknowledged both (one a failover
    // dropped is restored: test/integration/exactly-once/told-record-durable.test.ts).
    await this.untilDurable('settling a stream entry', { operationId }, async () => {
      if (told !== undefined) await told();
      for (const ref of refs) await settleEntry(this.commands, ref);
    });
    if (held !== undefined)
      for (const ref of refs)
        if (held.refs.includes(ref)) held.refs.splice(held.refs.indexOf(ref), 1);
    if (this.unacked.get(key) === held && held?.refs.length === 0) this.unacked.delete(key);
  }

  /**
   * untilWritten, and the write is durable (redis.durability) before it counts: a write the
   * replicas did not acknowledge is written again, so one a failover dropped is restored. If the
   * replicas stay away past the retry window, the write stands on the primary alone.
   */
  private async untilDurable<T>(
    what: string,
    op: Pick<Operation, 'operationId'>,
    write: () => Promise<T>,
  ): Promise<T> {
    const durability = this.options.durability;
    if (durability === undefined || durability.mode === 'none')
      return this.untilWritten(what, op, write);
    let written: { readonly value: T } | undefined;
    try {
      return await this.untilWritten(what, op, async () => {
        written = { value: await write() };
        const durable = await this.options.ledger.writesDurable(durability);
        if (!durable.ok) throw new NotDurableYet(durable.reason);
        return written.value;
      });
    } catch (error) {
      if (written === undefined || !(error instanceof NotDurableYet)) throw error;
      this.options.log.warn(`${what} is not on any replica; kept on the primary alone`, {
        operation_id: op.operationId,
        reason: error.message,
      });
      return written.value;
    }
  }

  /**
   * Runs a write that records what the caller already has, again every RECORD_RETRY_MS while it
   * fails (Redis away, a failover), for up to RECORD_RETRY_FOR_MS; then it gives up and the error
   * goes to the caller of this.
   */
  private async untilWritten<T>(
    what: string,
    op: Pick<Operation, 'operationId'>,
    write: () => Promise<T>,
  ): Promise<T> {
    const giveUpAt = this.clock.now() + RECORD_RETRY_FOR_MS;
    for (let tries = 1; ; tries++) {
      try {
        return await write();
      } catch (error) {
        if (!this.running || this.clock.now() >= giveUpAt) throw error;
        if (tries === 1)
          this.options.log.warn(`${what} failed; trying again until Redis answers`, {
            operation_id: op.operationId,
            error,
          });
        await sleep(this.clock, RECORD_RETRY_MS);
      }
    }
  }

  /** Re-runs the gate for results waiting in a call (the caller stopped talking, a response ended). */
  async onIdle(sessionId: string): Promise<void> {
    const call = this.calls.get(sessionId);
    if (!call) return;
    for (const operationId of [...call.pending]) {
      // Its answer is in a tool output the caller may be hearing: gated once that settles (ToolRuntime.settleInlineAnswer).
      if (call.session.answeringInline.has(operationId)) continue;
      const op = await this.options.ledger.get(call.session.tenantId, operationId);
      if (!op) continue;
      call.pending.delete(operationId);
      await this.act(op, sessionId, call, await this.decide(op, sessionId, call), true);
    }
  }

  /** The call ended: results still owed go out of band; later events find the call over. */
  async onCallEnded(sessionId: string, phase: 'hung_up' | 'transferred'): Promise<void> {
    const call = this.calls.get(sessionId);
    if (!call) return;
    call.session.phase = phase;
    this.clock.schedule(() => this.calls.delete(sessionId), ENDED_CALL_MEMORY_MS);
    // A result being spoken as the call ends is owed unless its speech finished: wait for its end
    // (the port ends it with the call) before judging what the caller still needs.
    await Promise.all([...call.speaking.values()].map((s) => s.done));
    const owed = new Set([
      ...call.pending,
      ...[...call.session.operations.values()].filter((o) => !o.told).map((o) => o.operationId),
    ]);
    call.pending.clear();
    for (const operationId of owed) {
      // Redis away at the hang-up must not leave the result held here for ever: the hand-over is
      // tried again until Redis answers (each step is idempotent: records move forward only, one
      // message job per operation and channel).
      await this.untilWritten('the out-of-band hand-over', { operationId }, async () => {
        const op = await this.options.ledger.get(call.session.tenantId, operationId);
        // Operations still running report later through their own events.
        if (!op || !(isTerminal(op.state) || op.state === 'UNKNOWN')) return;
        // Already judged as needing no words (superseded without effect, already told): final.
        if ((await this.options.ledger.deliveryFor(op, sessionId))?.decision === 'suppress') return;
        await this.act(op, sessionId, call, await this.decide(op, sessionId, call), true);
      }).catch((error: unknown) => {
        // Still failing: its entries are let go (no longer refreshed), so a janitor takes them over.
        this.unacked.delete(unackedKey(sessionId, operationId));
        this.options.log.error('out-of-band hand-over failed; leaving the result to a janitor', {
          session_id: sessionId,
          operation_id: operationId,
          error,
        });
      });
    }
  }

  private snapshot(
    op: Operation,
    told: DeliveryRecord | undefined,
    call: AttachedCall | undefined,
  ): SessionSnapshot {
    // Queued out of band counts as told for the gateway side: nothing more is spoken.
    const persistedTold =
      (told?.delivered === true || told?.channel === 'out_of_band') &&
      told.decision !== 'reconcile_first';
    if (!call) {
      return {
        call: 'gone',
        activeAgent: op.scope.agent ?? '',
        activeAgentMayReveal: false,
        callerSpeaking: false,
        callerOnHold: false,
        responseActive: false,
        alreadyTold: persistedTold,
        superseded: false,
      };
    }
    const catalogue = call.session.catalogue ?? this.options.catalogue;
    const snapshot = call.session.snapshot(op.operationId, (agent, action) =>
      catalogue.mayReveal(agent, action),
    );
    // Being spoken is not told (it may be cut): a second event meanwhile waits, as for any response.
    return {
      ...snapshot,
      alreadyTold: snapshot.alreadyTold || persistedTold,
      responseActive: snapshot.responseActive || call.speaking.has(op.operationId),
    };
  }

  /** Runs the gate for the caller of `sessionId`, judged by that session's own delivery record. */
  private async decide(
    op: Operation,
    sessionId: string,
    call: AttachedCall | undefined,
    eventAt?: number,
  ): Promise<RelevanceDecision> {
    const record = await this.options.ledger.deliveryFor(op, sessionId);
    const decision = decideRelevance(
      {
        operationId: op.operationId,
        action: op.action,
        state: op.state as 'COMMITTED' | 'FAILED_FINAL' | 'CANCELLED' | 'UNKNOWN',
        agent: op.scope.agent,
        goal: op.scope.goal,
        compensates: op.compensates,
      },
      this.snapshot(op, record, call),
    );
    const now = this.now();
    // Forward only: a duplicate's "already told" keeps the record of the delivery that happened or
    // is under way, and no decision replaces a final record (record-delivery-1.lua).
    await this.options.ledger.advanceDelivery(
      op,
      {
        decision: decision.decision,
        reasons: decision.reasons,
        at: now,
        agent: call?.session.activeAgent,
        channel: 'none',
        delivered: false,
      },
      sessionId,
    );
    for (const reason of decision.reasons) gateDecisions.labels(decision.decision, reason).inc();
    if (eventAt !== undefined)
      deliveryLag.labels(decision.decision).observe(Math.max(0, now - eventAt) / 1000);
    if (
      call &&
      op.scope.turnId !== undefined &&
      sessionId === op.scope.sessionId &&
      op.scope.turnId !== String(call.session.turnId)
    )
      lateResults.labels(op.action).inc();
    await this.options.audit.record(
      sessionId,
      {
        type: 'gate_decision',
        operationId: op.operationId,
        state: op.state,
        decision: decision.decision,
        reasons: decision.reasons,
        agent: call?.session.activeAgent ?? '',
      },
      call?.session.turnId,
    );
    return decision;
  }

  /** `awaitSpeech`: wait for a spoken result to finish (idle and call-end handling), or not (the read loop). */
  private async act(
    op: Operation,
    sessionId: string,
    call: AttachedCall | undefined,
    { decision, reasons }: RelevanceDecision,
    awaitSpeech: boolean,
  ): Promise<void> {
    switch (decision) {
      case 'speak_now':
      case 'route_to_active_agent':
        if (call && !(reasons.includes('caller_speaking') || reasons.includes('response_active'))) {
          const spoken = this.speak(op, sessionId, call, reasons).then(async (told) => {
            if (told) await this.settle(sessionId, op.operationId, told);
          });
          if (awaitSpeech) await spoken;
          else
            spoken.catch((error: unknown) =>
              this.options.log.warn('speaking a result failed', {
                ...operationLogFields(op),
                error,
              }),
            );
          return;
        }
        if (call) this.waitForIdle(sessionId, call, op.operationId);
        return;
      case 'speak_when_idle':
        if (call) this.waitForIdle(sessionId, call, op.operationId);
        return;
      case 'hold':
        call?.pending.add(op.operationId);
        return;
      case 'reconcile_first':
        return;
      case 'suppress':
        // Reached from idle or call-end handling only (the read loop acknowledges duplicates itself):
        // a result held for later that no longer needs saying lets its entries go.
        await this.settle(sessionId, op.operationId);
        return;
      case 'deliver_out_of_band':
        if (!(await this.owns(sessionId, op.operationId))) return;
        await this.sendOutOfBand(op, sessionId, call, reasons);
        await this.settle(sessionId, op.operationId);
        return;
    }
  }

  /**
   * Keeps a result for the call's next idle moment. The call may have gone idle while the gate
   * decided (its response ended between the snapshot and now): its idle signal found nothing
   * pending then, and no other is coming, so it is offered again at once.
   */
  private waitForIdle(sessionId: string, call: AttachedCall, operationId: string): void {
    call.pending.add(operationId);
    const { session } = call;
    if (
      session.phase !== 'active' ||
      session.callerSpeaking ||
      session.responseActive ||
      session.callerOnHold ||
      call.speaking.size > 0
    )
      return;
    setImmediate(() => {
      this.onIdle(sessionId).catch((error: unknown) =>
        this.options.log.warn('delivery on idle failed', { session_id: sessionId, error }),
      );
    });
  }

  /** Speaks a result; when the caller heard it to the end, the record that says so (written once already). */
  private async speak(
    op: Operation,
    sessionId: string,
    call: AttachedCall,
    reasons: readonly string[],
  ): Promise<ToldRecord | undefined> {
    if (call.speaking.has(op.operationId)) return undefined;
    const stop = new AbortController();
    let ended: () => void = () => undefined;
    call.speaking.set(op.operationId, {
      stop,
      done: new Promise<void>((resolve) => (ended = resolve)),
    });
    if (!(await this.owns(sessionId, op.operationId))) {
      call.speaking.delete(op.operationId);
      ended();
      return undefined;
    }
    let outcome: SpokenOutcome;
    try {
      outcome = await call.port.deliver(
        {
          operationId: op.operationId,
          message: describeForModel(op, reasons),
          output: modelOutput(op),
        },
        stop.signal,
      );
      // Heard to the end, though the hold may have lapsed meanwhile (cut too late, or ended between
      // two looks of the pause watch): told unless a janitor has taken it over by now.
      if (
        outcome.status === 'completed' &&
        (stop.signal.aborted || this.holdLapsed(sessionId, op.operationId)) &&
        !(await this.stillOwns(sessionId, op.operationId))
      )
        outcome = { ...outcome, status: 'cancelled' };
    } catch (error) {
      this.options.log.warn('speaking a result failed', { ...operationLogFields(op), error });
      outcome = { status: 'failed' };
    } finally {
      call.speaking.delete(op.operationId);
      ended();
    }
    const owned = call.session.operations.get(op.operationId);
    if (outcome.status !== 'completed') {
      // Cut off (barge-in) or failed: the caller did not hear it all. Say it again when idle.
      call.pending.add(op.operationId);
      await this.options.audit.record(
        sessionId,
        {
          type: 'delivery_interrupted',
          operationId: op.operationId,
          responseId: outcome.responseId,
        },
        call.session.turnId,
      );
      return undefined;
    }
    if (owned) owned.told = true;
    // A result that waited out a hold is measured from the resume: the wait was the caller's.
    const committedAt = op.committedAt ?? op.finishedAt;
    const from =
      committedAt === undefined ? undefined : Math.max(committedAt, call.session.resumedAt ?? 0);
    const audibleMs =
      outcome.firstAudioAt !== undefined && from !== undefined
        ? Math.max(0, outcome.firstAudioAt - from)
        : undefined;
    if (audibleMs !== undefined)
      observeWithExemplar(commitToAudible, { action: op.action }, audibleMs / 1000, {
        session_id: sessionId,
        operation_id: op.operationId,
      });
    const spoken: DeliveryRecord = {
      decision: 'spoken',
      reasons,
      at: this.now(),
      agent: call.session.activeAgent,
      responseId: outcome.responseId,
      channel: 'voice',
      delivered: true,
      commitToAudibleMs: audibleMs,
    };
    // The caller heard it: that must reach the ledger, also when Redis is away right now. Made
    // durable together with the settling of its entries (settle), so one wait covers both.
    const record = () => this.options.ledger.advanceDelivery(op, spoken, sessionId);
    await this.untilWritten('the spoken record', op, record);
    await this.options.audit.record(
      sessionId,
      {
        type: 'delivered',
        operationId: op.operationId,
        channel: 'voice',
        responseId: outcome.responseId,
        commitToAudibleMs: audibleMs,
      },
      call.session.turnId,
    );
    return record;
  }

  /**
   * Queues the result as a message to the operation's caller. A session that only joined a shared
   * read gets none: the out-of-band queue keeps one message per operation (its owner's), and the
   * gate's record for the joiner already says it was not delivered. The record says queued, not
   * delivered: each channel's delivery is recorded by the worker when the receiver took it
   * (`Operation.outOfBand`, test/integration/agents/out-of-band-webhook-down.test.ts).
   */
  private async sendOutOfBand(
    op: Operation,
    sessionId: string,
    call: AttachedCall | undefined,
    reasons: readonly string[],
  ): Promise<void> {
    if (sessionId !== op.scope.sessionId) return;
    const channels = await this.options.outOfBand.enqueue({
      operationId: op.operationId,
      tenantId: op.tenantId,
      sessionId: op.scope.sessionId,
      caller: op.scope.caller,
      state: op.state,
      text: describeForCaller(op),
      reasons,
    });
    const owned = call?.session.operations.get(op.operationId);
    if (owned) owned.told = true;
    await this.options.ledger.advanceDelivery(op, {
      decision: 'deliver_out_of_band',
      reasons,
      at: this.clock.epochMs(),
      agent: call?.session.activeAgent,
      channel: 'out_of_band',
      delivered: false,
      queued: channels.length > 0,
    });
    await this.options.audit.record(
      op.scope.sessionId,
      { type: 'delivered', operationId: op.operationId, channel: 'out_of_band' },
      call?.session.turnId,
    );
  }
}

/** Stream entries are held per session and operation: a shared read is owed to each of its calls. */
/** Stream entries held for one session's result, and when Redis last confirmed the hold (monotonic ms, when the check was sent). */
interface HeldResult {
  readonly sessionId: string;
  readonly operationId: string;
  refs: HeldEntry[];
  heldAt: number;
}

function unackedKey(sessionId: string, operationId: string): string {
  return `${sessionId} ${operationId}`;
}

type StreamReply = [string, [string, string[]][]][];

function toRecord(fields: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i] ?? ''] = fields[i + 1] ?? '';
  return out;
}

export async function ensureGroup(redis: Redis, key: string): Promise<void> {
  try {
    // From the start of the stream: events written before this gateway first read are not lost.
    await redis.xgroup('CREATE', key, DELIVERY_GROUP, '0', 'MKSTREAM');
  } catch (error) {
    if (!(error instanceof Error && error.message.includes('BUSYGROUP'))) throw error;
  }
}

export { toRecord as streamFields };

function modelOutput(op: Operation): Record<string, unknown> {
  return {
    operation_id: op.operationId,
    action: op.action,
    state: op.state,
    result: op.result,
    error: op.error,
  };
}
