/**
 * The chaos run's checker: from what the sandbox did (effects, concurrency), what the ledger says
 * (operations, UNKNOWN alerts, delivery records), what each caller heard (the gateways' journals)
 * and what the out-of-band channels received, the violations of each invariant. Pure: the run
 * gathers the inputs (chaos-run.ts), this decides.
 */
import type { Operation } from '../../jobs/ledger/operation.ts';
import type {
  ConcurrencyOverlap,
  ConcurrencyReport,
  InProgressRequest,
  SandboxEffect,
} from '../../jobs/providers/sandbox/effect-journal.ts';
import type { SinkMessage } from '../../jobs/providers/sandbox/message-sink.ts';
import { bookingKey, refundKey, type IntentPlan } from './call-plan.ts';
import type { JournalEntry } from './journal.ts';
import type { ReceivedWebhook } from './webhook-receiver.ts';

export const INVARIANTS = [
  /** Each intent has 0 or 1 effects, and exactly 1 when one of its operations is COMMITTED. */
  'effects_per_intent',
  /** No provider request began while the tenant's action already had maxConcurrent in progress. */
  'provider_concurrency',
  'cancelled_with_effect',
  /** Every result owed to a caller reached them, or its failure to is visible (alert, given up). */
  'delivered_zero_times',
  /** Heard by voice and also sent out of band, or heard twice, or sent twice. */
  'delivered_more_than_once',
  /** An UNKNOWN operation is flagged reconcile_stuck or counted by callgate_operations_unknown. */
  'unknown_without_alert',
] as const;

export type Invariant = (typeof INVARIANTS)[number];

export interface LedgerView {
  readonly operation: Operation;
  /** reconcile_stuck is set: the reconciler gave up and an operator is alerted. */
  readonly reconcileStuck: boolean;
  /** In the tenant's UNKNOWN index, which callgate_operations_unknown and its age gauge count. */
  readonly countedUnknown: boolean;
  /** Its out-of-band message was given up (the notify job failed for good, or the record says so). */
  readonly outOfBandGaveUp: boolean;
  /** When each attempt (by its attempt token) was marked sending, on the ledger's clock. */
  readonly attemptSentAt?: Readonly<Record<string, number>>;
}

export interface ActionLimit {
  readonly tenantId: string;
  /** The provider operation the sandbox reports under (refund, book, cancel_booking). */
  readonly providerOperation: string;
  readonly maxConcurrent: number;
  /**
   * How long after its send an attempt whose outcome is unknown holds its lease at least: the
   * provider timeout plus the reconcile grace (docs/architecture.md, "Leases until the outcome is settled"). A request that reaches
   * the provider later than this is outside what the lease can count.
   */
  readonly leaseBoundMs?: number;
}

export interface CheckInput {
  readonly intents: readonly IntentPlan[];
  readonly journal: readonly JournalEntry[];
  readonly effects: readonly SandboxEffect[];
  readonly concurrency: ConcurrencyReport;
  readonly limits: readonly ActionLimit[];
  readonly ledger: readonly LedgerView[];
  readonly sms: readonly SinkMessage[];
  readonly webhooks: readonly ReceivedWebhook[];
  /** When Redis could not be reached (a failover or a restart, until clients could reconnect). */
  readonly ledgerOutages?: readonly TimeWindow[];
  /** Gateways killed with SIGKILL, and when (the run's clock). */
  readonly gatewayKills?: readonly { readonly gatewayId: string; readonly at: number }[];
  /** Each gateway's clock offset (libfaketime), to read its journal's times on the run's clock. */
  readonly gatewayClockOffsets?: Readonly<Record<string, number>>;
}

export interface TimeWindow {
  readonly start: number;
  readonly end: number;
}

export interface CheckResult {
  readonly violations: Record<Invariant, number>;
  /** The violations of each invariant by cause (`effects_per_intent/one_operation_twice`, ...). */
  readonly causes: Record<string, number>;
  /** A few examples per invariant, to start a reproduction from. */
  readonly examples: Record<Invariant, string[]>;
  /**
   * Results heard and also sent out of band where no gateway could have known better: the caller
   * heard the result's end while Redis was away (or just as it went), and the gateway was killed
   * before Redis was back, so nothing could record that the caller had it. callgate then sends it
   * again by message rather than risk the caller never getting it. Counted, not a violation.
   */
  readonly toldTwiceLedgerUnreachable: { readonly count: number; readonly examples: string[] };
  /**
   * Requests that began above an action's limit only because a request held on its way (a proxy,
   * a paused worker) reached the provider after its attempt's lease bound had passed and before
   * reconciliation voided it: the documented bound of the lease, counted apart from violations.
   */
  readonly heldPastLeaseBound: { readonly count: number; readonly examples: string[] };
}

/** A write in flight when Redis went away is lost with it: a result heard this long before counts as heard during the outage. */
const OUTAGE_LEAD_MS = 1_000;

/** Actions whose results are owed to the caller, by the intent kind they serve. */
const INTENT_ACTIONS = new Set(['refund', 'book_table']);
const MAX_EXAMPLES = 5;

export function check(input: CheckInput): CheckResult {
  const violations = Object.fromEntries(INVARIANTS.map((name) => [name, 0])) as Record<
    Invariant,
    number
  >;
  const examples = Object.fromEntries(INVARIANTS.map((name) => [name, []])) as unknown as Record<
    Invariant,
    string[]
  >;
  const causes: Record<string, number> = {};
  const violate = (name: Invariant, cause: string, example: string, count = 1) => {
    violations[name] += count;
    causes[`${name}/${cause}`] = (causes[`${name}/${cause}`] ?? 0) + count;
    // The first example of each cause comes first: a rare cause is not hidden by a frequent one.
    const firstOfCause = causes[`${name}/${cause}`] === count;
    if (firstOfCause) examples[name].unshift(example);
    else examples[name].push(example);
    if (examples[name].length > MAX_EXAMPLES) examples[name].pop();
  };

  const intentByKey = new Map(
    input.intents.map((intent) => [`${intent.tenantId}|${intent.kind}|${intent.key}`, intent]),
  );
  const effectsByIntent = new Map<string, SandboxEffect[]>();
  const effectsByReference = new Map<string, SandboxEffect[]>();
  for (const effect of input.effects) {
    if (effect.reference !== undefined) push(effectsByReference, effect.reference, effect);
    const key = effectIntentKey(effect);
    if (key === undefined) continue;
    const intent = intentByKey.get(key);
    push(effectsByIntent, intent?.intentId ?? `unplanned ${key}`, effect);
  }
  const opsByIntent = new Map<string, LedgerView[]>();
  const byId = new Map(input.ledger.map((view) => [view.operation.operationId, view]));
  for (const view of input.ledger) {
    const key = operationIntentKey(view.operation);
    const intent = key === undefined ? undefined : intentByKey.get(key);
    if (intent) push(opsByIntent, intent.intentId, view);
  }

  // Effects per intended operation.
  for (const [intentId, effects] of effectsByIntent) {
    if (intentId.startsWith('unplanned') || effects.length > 1) {
      const references = new Set(effects.map((e) => e.reference));
      const cause = intentId.startsWith('unplanned')
        ? 'unplanned'
        : references.size < effects.length
          ? 'one_operation_twice'
          : 'two_operations';
      violate(
        'effects_per_intent',
        cause,
        `${intentId}: ${effects.length} effects (${effects.map((e) => e.reference ?? '?').join(', ')}), operations ${describeOps(opsByIntent.get(intentId))}`,
      );
    }
  }
  for (const intent of input.intents) {
    const ops = opsByIntent.get(intent.intentId) ?? [];
    const effects = effectsByIntent.get(intent.intentId) ?? [];
    const committed = ops.filter((v) => v.operation.state === 'COMMITTED');
    if (committed.length > 0 && effects.length === 0)
      violate(
        'effects_per_intent',
        'committed_without_effect',
        `${intent.intentId}: COMMITTED (${committed.map((v) => v.operation.operationId).join(', ')}) without an effect`,
      );
    const maybe = ops.some(
      (v) =>
        v.operation.state === 'COMMITTED' ||
        v.operation.state === 'UNKNOWN' ||
        !isSettled(v.operation),
    );
    if (effects.length > 0 && ops.length > 0 && !maybe)
      violate(
        'effects_per_intent',
        'effect_not_committed',
        `${intent.intentId}: an effect, but the ledger says ${describeOps(ops)}`,
      );
  }

  // Provider concurrency above the action's limit.
  const sentAtByToken = new Map<string, number>();
  for (const view of input.ledger)
    for (const [token, at] of Object.entries(view.attemptSentAt ?? {}))
      sentAtByToken.set(token, at);
  const heldPast = { count: 0, examples: [] as string[] };
  for (const limit of input.limits) {
    const perOperation =
      input.concurrency.tenants[limit.tenantId]?.operations[limit.providerOperation];
    let above = 0;
    for (const [level, count] of Object.entries(perOperation?.entered ?? {}))
      if (Number(level) > limit.maxConcurrent) above += count;
    if (above === 0) continue;
    const overlapsAbove = (perOperation?.overlaps ?? []).filter(
      (o) => o.inProgress.length > limit.maxConcurrent,
    );
    const unexplained: ConcurrencyOverlap[] = [];
    for (const overlap of overlapsAbove) {
      const late = overlap.inProgress.filter((r) =>
        arrivedPastLeaseBound(r, sentAtByToken, limit.leaseBoundMs),
      );
      if (late.length > 0 && overlap.inProgress.length - late.length <= limit.maxConcurrent) {
        heldPast.count += 1;
        if (heldPast.examples.length < MAX_EXAMPLES)
          heldPast.examples.push(
            `${limit.tenantId} ${limit.providerOperation} at ${overlap.at}: ${late.map((r) => describeRequest(r, sentAtByToken)).join(', ')}`,
          );
      } else unexplained.push(overlap);
    }
    // Overlaps not kept by the sandbox cannot be explained: they count.
    const violating = above - (overlapsAbove.length - unexplained.length);
    if (violating > 0) {
      const first = unexplained[0];
      const detail =
        first === undefined
          ? ''
          : `; at ${first.at}: ${first.inProgress.map((r) => describeRequest(r, sentAtByToken)).join(', ')}`;
      violate(
        'provider_concurrency',
        limit.providerOperation,
        `${limit.tenantId} ${limit.providerOperation}: ${violating} requests began above maxConcurrent ${limit.maxConcurrent} (max ${perOperation?.max ?? 0})${detail}`,
        violating,
      );
    }
  }

  // CANCELLED with an effect.
  for (const view of input.ledger) {
    const effects = effectsByReference.get(view.operation.operationId) ?? [];
    if (view.operation.state === 'CANCELLED' && effects.length > 0)
      violate(
        'cancelled_with_effect',
        view.operation.action,
        `${view.operation.operationId} (${view.operation.action}) CANCELLED with ${effects.length} effect(s)`,
      );
  }

  // Deliveries: heard to the end on a call, and messages received out of band.
  const toldTwice = { count: 0, examples: [] as string[] };
  const gatewayOfSession = new Map<string, string>();
  for (const entry of input.journal)
    if (entry.type === 'call_started') gatewayOfSession.set(entry.sessionId, entry.gatewayId);
  /** The caller heard it to the end within an outage that lasted until its gateway was killed. */
  const heardWithLedgerAway = (operationId: string): boolean =>
    input.journal.some((entry) => {
      if (
        entry.type !== 'result_played' ||
        entry.operationId !== operationId ||
        entry.status !== 'completed'
      )
        return false;
      const gatewayId = gatewayOfSession.get(entry.sessionId) ?? '';
      const heardAt = entry.at - (input.gatewayClockOffsets?.[gatewayId] ?? 0);
      const killedAt = (input.gatewayKills ?? [])
        .filter((kill) => kill.gatewayId === gatewayId && kill.at >= heardAt)
        .map((kill) => kill.at)
        .sort((a, b) => a - b)[0];
      if (killedAt === undefined) return false;
      return (input.ledgerOutages ?? []).some(
        (outage) =>
          outage.start <= Math.min(heardAt + OUTAGE_LEAD_MS, killedAt) && outage.end >= killedAt,
      );
    });
  const heard = new Map<string, number>();
  for (const entry of input.journal) {
    if (entry.type === 'result_played' && entry.status === 'completed')
      heard.set(entry.operationId, (heard.get(entry.operationId) ?? 0) + 1);
  }
  const smsKeys = distinctKeys(
    input.sms.map((m) => ({
      operationId: m.operationId ?? '',
      key: m.idempotencyKey ?? `seq-${m.seq}`,
    })),
  );
  const webhookKeys = distinctKeys(
    input.webhooks.map((w, i) => ({
      operationId: w.operationId,
      key: w.idempotencyKey ?? `n-${i}`,
    })),
  );
  for (const view of input.ledger) {
    const op = view.operation;
    if (!INTENT_ACTIONS.has(op.action) || op.compensates !== undefined) continue;
    const voice = heard.get(op.operationId) ?? 0;
    // One message may go over several channels (webhook and SMS): that is one delivery.
    const outOfBand = Math.max(
      smsKeys.get(op.operationId) ?? 0,
      webhookKeys.get(op.operationId) ?? 0,
    );
    const total = voice + outOfBand;
    const owed = op.state === 'COMMITTED' || op.state === 'FAILED_FINAL';
    if (owed && total === 0 && !view.outOfBandGaveUp)
      violate(
        'delivered_zero_times',
        op.delivery?.delivered === true ? 'ledger_says_delivered' : 'not_delivered',
        `${op.operationId} (${op.action}) ${op.state}, delivery record ${JSON.stringify(op.delivery ?? null)}`,
      );
    if (!isSettled(op) && op.state !== 'UNKNOWN')
      violate(
        'delivered_zero_times',
        'still_open',
        `${op.operationId} (${op.action}) still ${op.state} after settling`,
      );
    if (total > 1 && voice > 0 && outOfBand > 0 && heardWithLedgerAway(op.operationId)) {
      toldTwice.count++;
      if (toldTwice.examples.length < MAX_EXAMPLES)
        toldTwice.examples.push(
          `${op.operationId} (${op.action}) heard, then the gateway died with Redis away: sent out of band too`,
        );
    } else if (total > 1)
      violate(
        'delivered_more_than_once',
        voice > 0 && outOfBand > 0
          ? 'voice_and_out_of_band'
          : voice > 1
            ? 'voice_twice'
            : 'out_of_band_twice',
        `${op.operationId} (${op.action}) ${op.state}: heard ${voice}, out of band ${outOfBand}, record ${JSON.stringify(op.delivery ?? null)}`,
      );
    if (op.state === 'UNKNOWN' && !view.reconcileStuck && !view.countedUnknown)
      violate(
        'unknown_without_alert',
        op.action,
        `${op.operationId} (${op.action}) UNKNOWN, neither reconcile_stuck nor counted`,
      );
  }
  // A caller told "started" for an operation the ledger no longer has (lost with a Redis node): nothing will ever tell them.
  for (const entry of input.journal) {
    if (
      entry.type !== 'tool_answered' ||
      entry.status !== 'started' ||
      entry.operationId === undefined
    )
      continue;
    if (!byId.has(entry.operationId))
      violate(
        'delivered_zero_times',
        'lost_from_ledger',
        `${entry.operationId} (${entry.intentId}) answered started, missing from the ledger`,
      );
  }
  return {
    violations,
    causes,
    examples,
    toldTwiceLedgerUnreachable: toldTwice,
    heldPastLeaseBound: heldPast,
  };
}

function isSettled(op: Operation): boolean {
  return op.state === 'COMMITTED' || op.state === 'FAILED_FINAL' || op.state === 'CANCELLED';
}

function effectIntentKey(effect: SandboxEffect): string | undefined {
  const r = effect.result;
  if (effect.service === 'payments' && effect.operation === 'refund')
    return `${effect.tenant}|refund|${refundKey(r.order_id, r.amount_cents)}`;
  if (effect.service === 'bookings' && effect.operation === 'book')
    return `${effect.tenant}|booking|${bookingKey(r.restaurant, r.date, r.time, r.party_size)}`;
  return undefined;
}

function operationIntentKey(op: Operation): string | undefined {
  const p = op.params;
  if (op.action === 'refund')
    return `${op.tenantId}|refund|${refundKey(p.order_id, p.amount_cents)}`;
  if (op.action === 'book_table')
    return `${op.tenantId}|booking|${bookingKey(p.restaurant, p.date, p.time, p.party_size)}`;
  return undefined;
}

function describeOps(views: readonly LedgerView[] | undefined): string {
  return (
    (views ?? []).map((v) => `${v.operation.operationId}=${v.operation.state}`).join(', ') || 'none'
  );
}

function distinctKeys(rows: readonly { operationId: string; key: string }[]): Map<string, number> {
  const seen = new Map<string, Set<string>>();
  for (const { operationId, key } of rows) {
    const keys = seen.get(operationId) ?? new Set();
    keys.add(key);
    seen.set(operationId, keys);
  }
  return new Map([...seen].map(([id, keys]) => [id, keys.size]));
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** The request reached the provider later after its send than its attempt's lease is bound to last. */
function arrivedPastLeaseBound(
  request: InProgressRequest,
  sentAtByToken: ReadonlyMap<string, number>,
  leaseBoundMs: number | undefined,
): boolean {
  if (leaseBoundMs === undefined || request.attemptToken === undefined) return false;
  const sentAt = sentAtByToken.get(request.attemptToken);
  return sentAt !== undefined && Date.parse(request.since) > sentAt + leaseBoundMs;
}

function describeRequest(
  request: InProgressRequest,
  sentAtByToken: ReadonlyMap<string, number>,
): string {
  const sentAt =
    request.attemptToken === undefined ? undefined : sentAtByToken.get(request.attemptToken);
  const late =
    sentAt === undefined ? '' : ` (${Date.parse(request.since) - sentAt} ms after its send)`;
  return `${request.reference ?? '?'} attempt ${(request.attemptToken ?? '?').slice(0, 8)} since ${request.since}${late}`;
}
