/**
 * The simulated calls of a chaos run, planned up front from the seed: each call is one caller on
 * one tenant who asks for one or two things (a refund or a table), each thing one human intent
 * that may be asked for several times (a reworded reason, `confirmed: true` added after the caller
 * said yes, the same booking again under another spelling of the name). Intents never share their
 * key fields, so every effect at the sandbox belongs to exactly one intent.
 */
import type { SeededRandom } from './seeded-random.ts';

export type IntentKind = 'refund' | 'booking';

export interface ToolStep {
  readonly tool: 'refund' | 'book_table';
  readonly arguments: Readonly<Record<string, unknown>>;
  /** Pause before this tool call (the model thinking, the caller talking). */
  readonly delayMs: number;
}

export interface IntentPlan {
  readonly intentId: string;
  readonly tenantId: string;
  readonly kind: IntentKind;
  /** The intent's key fields as one string: `order|amount` or `restaurant|date|time|party`. */
  readonly key: string;
  readonly steps: readonly ToolStep[];
}

export interface CallPlan {
  readonly sessionId: string;
  readonly tenantId: string;
  readonly agent: 'billing' | 'reservations';
  readonly caller: string;
  readonly seed: number;
  readonly intents: readonly IntentPlan[];
  /** Time on the line after the last tool call, before hanging up. */
  readonly stayMs: number;
  /** Chance that the caller talks over a result being spoken (a barge-in cuts it off). */
  readonly bargeInChance: number;
}

export interface TenantPlan {
  readonly tenantId: string;
  /** Refunds above this (EUR) need `confirmed: true`: the tenant's refund `confirmAbove`. */
  readonly confirmAbove?: number;
}

const REASONS = [
  'damaged on arrival',
  'the parcel arrived broken',
  'item was damaged',
  'broken when it came',
  'late delivery',
  'arrived two weeks late',
];
const RESTAURANTS = ['trattoria-roma', 'sushi-kaito', 'bistro-nord'] as const;
const TIMES = ['18:00', '18:30', '19:00', '19:30', '20:00', '20:30', '21:00'];
const NAMES = ['Grace Hopper', 'Ada Lovelace', 'Alan Turing', 'Barbara Liskov'];
/** The sandbox's orders ord_1001 .. ord_1050. */
const ORDERS = 50;
/** Bookings of a tenant start here, one date per intent, so no two intents share a slot. */
const FIRST_BOOKING_DAY = Date.UTC(2035, 0, 1);
const TENANT_DAY_OFFSET = 20_000;
/** A caller who stays on the line stays this long after the last tool call; chaos-run.ts waits for the longest. */
export const CALL_STAY_MAX_MS = 10_000;

export class CallPlanner {
  private calls = 0;
  private readonly refunds = new Map<string, number>();
  private readonly bookings = new Map<string, number>();
  readonly intents: IntentPlan[] = [];

  constructor(
    private readonly random: SeededRandom,
    private readonly tenants: readonly TenantPlan[],
    private readonly runId: string,
  ) {}

  next(): CallPlan {
    const r = this.random;
    this.calls++;
    const tenant = this.tenants[(this.calls - 1) % this.tenants.length] as TenantPlan;
    const kind: IntentKind = r.chance(0.5) ? 'refund' : 'booking';
    const intents = Array.from({ length: r.chance(0.3) ? 2 : 1 }, () =>
      kind === 'refund' ? this.refund(tenant) : this.booking(tenant),
    );
    const plan: CallPlan = {
      sessionId: `call-${this.runId}-${this.calls}`,
      tenantId: tenant.tenantId,
      agent: kind === 'refund' ? 'billing' : 'reservations',
      caller: `+1555${String(1_000_000 + this.calls).slice(-7)}`,
      seed: r.int(1, 2 ** 31),
      intents,
      // Some callers hang up at once (results go out of band), most stay to hear them.
      stayMs: r.chance(0.2) ? r.int(0, 500) : r.int(2_000, CALL_STAY_MAX_MS),
      bargeInChance: r.pick([0, 0.1, 0.3]),
    };
    this.intents.push(...intents);
    return plan;
  }

  private refund(tenant: TenantPlan): IntentPlan {
    const r = this.random;
    const n = this.refunds.get(tenant.tenantId) ?? 0;
    this.refunds.set(tenant.tenantId, n + 1);
    const orderId = `ord_${1001 + (n % ORDERS)}`;
    // Unique per order, and small: even many refunds of one order stay within its balance (>= 50 EUR).
    const amountCents = 1 + Math.floor(n / ORDERS);
    const needsYes = tenant.confirmAbove !== undefined && amountCents / 100 > tenant.confirmAbove;
    const first = { order_id: orderId, amount_cents: amountCents, reason: r.pick(REASONS) };
    const steps: ToolStep[] = [{ tool: 'refund', arguments: first, delayMs: r.int(0, 300) }];
    // Asked again after the caller said yes: the first answer was needs_confirmation, or (below the
    // threshold) it was already started and the model adds the flag anyway.
    if (needsYes || r.chance(0.3))
      steps.push({
        tool: 'refund',
        arguments: { ...first, confirmed: true },
        delayMs: r.int(200, 1_200),
      });
    if (r.chance(0.35))
      steps.push({
        tool: 'refund',
        arguments: { ...first, reason: r.pick(REASONS), ...(needsYes && { confirmed: true }) },
        delayMs: r.int(200, 1_500),
      });
    return {
      intentId: `${tenant.tenantId}/refund/${n}`,
      tenantId: tenant.tenantId,
      kind: 'refund',
      key: refundKey(orderId, amountCents),
      steps,
    };
  }

  private booking(tenant: TenantPlan): IntentPlan {
    const r = this.random;
    const n = this.bookings.get(tenant.tenantId) ?? 0;
    this.bookings.set(tenant.tenantId, n + 1);
    const offset = this.tenants.indexOf(tenant) * TENANT_DAY_OFFSET;
    const date = new Date(FIRST_BOOKING_DAY + (offset + n) * 86_400_000).toISOString().slice(0, 10);
    const first = {
      restaurant: r.pick(RESTAURANTS),
      date,
      time: r.pick(TIMES),
      party_size: r.int(1, 4),
      name: r.pick(NAMES),
    };
    const steps: ToolStep[] = [{ tool: 'book_table', arguments: first, delayMs: r.int(0, 300) }];
    if (r.chance(0.3))
      steps.push({ tool: 'book_table', arguments: first, delayMs: r.int(200, 1_200) });
    if (r.chance(0.2))
      steps.push({
        tool: 'book_table',
        arguments: { ...first, name: `${first.name.toUpperCase()} (party)` },
        delayMs: r.int(200, 1_500),
      });
    return {
      intentId: `${tenant.tenantId}/booking/${n}`,
      tenantId: tenant.tenantId,
      kind: 'booking',
      key: bookingKey(first.restaurant, date, first.time, first.party_size),
      steps,
    };
  }
}

export function refundKey(orderId: unknown, amountCents: unknown): string {
  return `${String(orderId)}|${String(amountCents)}`;
}

export function bookingKey(
  restaurant: unknown,
  date: unknown,
  time: unknown,
  partySize: unknown,
): string {
  return `${String(restaurant)}|${String(date)}|${String(time)}|${String(partySize)}`;
}
