/**
 * The chaos run's checker (bench/chaos/checker.ts) over small hand-made runs: each row is one way
 * a run can break an invariant, and a clean run counts nothing.
 */
import { describe, expect, it } from 'vitest';
import {
  check,
  INVARIANTS,
  type CheckInput,
  type Invariant,
  type LedgerView,
} from '../../../bench/chaos/checker.ts';
import type { IntentPlan } from '../../../bench/chaos/call-plan.ts';
import type { JournalEntry } from '../../../bench/chaos/journal.ts';
import type { Operation, OperationState } from '../../../jobs/ledger/operation.ts';
import {
  EffectJournal,
  type SandboxEffect,
} from '../../../jobs/providers/sandbox/effect-journal.ts';

const TENANT = 'chaos-a';
const INTENT: IntentPlan = {
  intentId: 'chaos-a/refund/0',
  tenantId: TENANT,
  kind: 'refund',
  key: 'ord_1001|1',
  steps: [],
};

function operation(id: string, state: OperationState): Operation {
  return {
    operationId: id,
    tenantId: TENANT,
    action: 'refund',
    kind: 'mutation',
    provider: 'payments',
    providerOperation: 'refund',
    idempotencyKey: `idk_${id}`,
    paramsHash: 'h',
    params: { order_id: 'ord_1001', amount_cents: 1 },
    scope: { sessionId: 'call-1', ownerGateway: 'gw-0-1' },
    state,
    attempt: 1,
    attemptTokens: [],
    sentAttempts: 1,
    sending: false,
    uncertain: false,
    providerIdempotent: false,
    money: true,
    createdAt: 0,
    admissionDeadlineAt: 0,
    deadlineAt: 0,
    cancelRequested: false,
  };
}

function view(id: string, state: OperationState, extra: Partial<LedgerView> = {}): LedgerView {
  return {
    operation: operation(id, state),
    reconcileStuck: false,
    countedUnknown: false,
    outOfBandGaveUp: false,
    ...extra,
  };
}

function effect(reference: string): SandboxEffect {
  return {
    seq: 1,
    service: 'payments',
    operation: 'refund',
    tenant: TENANT,
    reference,
    idempotencyKey: undefined,
    providerRef: `rf_${reference}`,
    at: '',
    result: { order_id: 'ord_1001', amount_cents: 1 },
  };
}

const heard = (operationId: string): JournalEntry => ({
  type: 'result_played',
  at: 0,
  sessionId: 'call-1',
  operationId,
  status: 'completed',
});

function run(overrides: Partial<CheckInput>): Record<Invariant, number> {
  return check({
    intents: [INTENT],
    journal: [],
    effects: [],
    concurrency: { tenants: {} },
    limits: [],
    ledger: [],
    sms: [],
    webhooks: [],
    ...overrides,
  }).violations;
}

const none = Object.fromEntries(INVARIANTS.map((name) => [name, 0])) as Record<Invariant, number>;

describe('when the chaos checker reads a run', () => {
  const rows: {
    name: string;
    input: Partial<CheckInput>;
    expected: Partial<Record<Invariant, number>>;
  }[] = [
    {
      name: 'a committed refund heard once',
      input: {
        ledger: [view('op_a', 'COMMITTED')],
        effects: [effect('op_a')],
        journal: [heard('op_a')],
      },
      expected: {},
    },
    {
      name: 'two operations for one intent, one refund each',
      input: {
        ledger: [view('op_a', 'COMMITTED'), view('op_b', 'COMMITTED')],
        effects: [effect('op_a'), effect('op_b')],
        journal: [heard('op_a'), heard('op_b')],
      },
      expected: { effects_per_intent: 1 },
    },
    {
      name: 'COMMITTED without an effect',
      input: { ledger: [view('op_a', 'COMMITTED')], journal: [heard('op_a')] },
      expected: { effects_per_intent: 1 },
    },
    {
      name: 'an effect the ledger calls failed',
      input: {
        ledger: [view('op_a', 'FAILED_FINAL')],
        effects: [effect('op_a')],
        journal: [heard('op_a')],
      },
      expected: { effects_per_intent: 1 },
    },
    {
      name: 'CANCELLED with an effect',
      input: { ledger: [view('op_a', 'CANCELLED')], effects: [effect('op_a')] },
      expected: { cancelled_with_effect: 1, effects_per_intent: 1 },
    },
    {
      name: 'three requests begun at level 3 with maxConcurrent 2',
      input: {
        concurrency: {
          tenants: {
            [TENANT]: {
              current: 0,
              max: 3,
              operations: { refund: { current: 0, max: 3, entered: { '1': 4, '2': 4, '3': 3 } } },
            },
          },
        },
        limits: [{ tenantId: TENANT, providerOperation: 'refund', maxConcurrent: 2 }],
      },
      expected: { provider_concurrency: 3 },
    },
    {
      name: 'a committed result nobody got',
      input: { ledger: [view('op_a', 'COMMITTED')], effects: [effect('op_a')] },
      expected: { delivered_zero_times: 1 },
    },
    {
      name: 'a committed result whose message was given up (visible)',
      input: {
        ledger: [view('op_a', 'COMMITTED', { outOfBandGaveUp: true })],
        effects: [effect('op_a')],
      },
      expected: {},
    },
    {
      name: 'heard, and also sent by SMS',
      input: {
        ledger: [view('op_a', 'COMMITTED')],
        effects: [effect('op_a')],
        journal: [heard('op_a')],
        sms: [
          {
            seq: 1,
            channel: 'sms',
            idempotencyKey: 'oob-op_a',
            operationId: 'op_a',
            body: {},
            at: 0,
            deliveries: 1,
          },
        ],
      },
      expected: { delivered_more_than_once: 1 },
    },
    {
      name: 'one message over webhook and SMS',
      input: {
        ledger: [view('op_a', 'COMMITTED')],
        effects: [effect('op_a')],
        sms: [
          {
            seq: 1,
            channel: 'sms',
            idempotencyKey: 'oob-op_a',
            operationId: 'op_a',
            body: {},
            at: 0,
            deliveries: 2,
          },
        ],
        webhooks: [
          { operationId: 'op_a', idempotencyKey: 'oob-op_a', at: 0 },
          { operationId: 'op_a', idempotencyKey: 'oob-op_a', at: 1 },
        ],
      },
      expected: {},
    },
    {
      name: 'UNKNOWN neither flagged nor counted',
      input: { ledger: [view('op_a', 'UNKNOWN')] },
      expected: { unknown_without_alert: 1 },
    },
    {
      name: 'UNKNOWN counted by the gauge',
      input: { ledger: [view('op_a', 'UNKNOWN', { countedUnknown: true })] },
      expected: {},
    },
    {
      name: 'an operation still RUNNING after the settle',
      input: { ledger: [view('op_a', 'RUNNING')] },
      expected: { delivered_zero_times: 1 },
    },
    {
      name: 'a "started" the ledger lost',
      input: {
        journal: [
          {
            type: 'tool_answered',
            at: 0,
            sessionId: 'call-1',
            intentId: INTENT.intentId,
            tool: 'refund',
            status: 'started',
            operationId: 'op_gone',
          },
        ],
      },
      expected: { delivered_zero_times: 1 },
    },
  ];
  for (const row of rows) {
    it(`should count ${JSON.stringify(row.expected)} for ${row.name}`, () => {
      expect(run(row.input)).toEqual({ ...none, ...row.expected });
    });
  }
});

describe('when one operation made two refunds and two operations made one each', () => {
  it('should tell the two causes apart', () => {
    const other: IntentPlan = { ...INTENT, intentId: 'chaos-a/refund/1', key: 'ord_1002|1' };
    const twice = { ...effect('op_c'), result: { order_id: 'ord_1002', amount_cents: 1 } };
    const result = check({
      intents: [INTENT, other],
      journal: [heard('op_a'), heard('op_b'), heard('op_c')],
      effects: [effect('op_a'), effect('op_b'), twice, { ...twice, seq: 2 }],
      concurrency: { tenants: {} },
      limits: [],
      ledger: [
        view('op_a', 'COMMITTED'),
        view('op_b', 'COMMITTED'),
        {
          ...view('op_c', 'COMMITTED'),
          operation: {
            ...operation('op_c', 'COMMITTED'),
            params: { order_id: 'ord_1002', amount_cents: 1 },
          },
        },
      ],
      sms: [],
      webhooks: [],
    });
    expect(result.causes).toEqual({
      'effects_per_intent/two_operations': 1,
      'effects_per_intent/one_operation_twice': 1,
    });
  });
});

describe('when a result was heard and also sent out of band', () => {
  const sent = {
    seq: 1,
    channel: 'sms' as const,
    idempotencyKey: 'oob_op_a',
    operationId: 'op_a',
    body: {},
    at: 0,
    deliveries: 1,
  };
  const base: CheckInput = {
    intents: [INTENT],
    journal: [
      { type: 'call_started', at: 0, sessionId: 'call-1', tenantId: TENANT, gatewayId: 'gw-0-1' },
      { ...heard('op_a'), at: 10_000 },
    ],
    effects: [effect('op_a')],
    concurrency: { tenants: {} },
    limits: [],
    ledger: [view('op_a', 'COMMITTED')],
    sms: [sent],
    webhooks: [],
  };

  it('should count it a violation when the gateway could still have recorded it', () => {
    // Killed with Redis reachable, or Redis away only after the gateway had seconds to write.
    for (const extra of [
      { gatewayKills: [{ gatewayId: 'gw-0-1', at: 11_000 }] },
      {
        gatewayKills: [{ gatewayId: 'gw-0-1', at: 16_000 }],
        ledgerOutages: [{ start: 15_000, end: 20_000 }],
      },
      {
        gatewayKills: [{ gatewayId: 'gw-0-1', at: 12_000 }],
        ledgerOutages: [{ start: 9_000, end: 11_000 }],
      },
    ]) {
      const result = check({ ...base, ...extra });
      expect(result.violations.delivered_more_than_once).toBe(1);
      expect(result.toldTwiceLedgerUnreachable.count).toBe(0);
    }
  });

  it('should count it apart when Redis was away from the moment it was heard until the gateway died', () => {
    const result = check({
      ...base,
      gatewayKills: [{ gatewayId: 'gw-0-1', at: 12_000 }],
      ledgerOutages: [{ start: 10_500, end: 14_000 }],
    });
    expect(result.violations.delivered_more_than_once).toBe(0);
    expect(result.toldTwiceLedgerUnreachable.count).toBe(1);
    // The same on a gateway whose clock ran 2 s ahead: its journal's times are read back on the run's clock.
    const ahead = check({
      ...base,
      journal: [base.journal[0] as JournalEntry, { ...heard('op_a'), at: 12_000 }],
      gatewayKills: [{ gatewayId: 'gw-0-1', at: 12_000 }],
      ledgerOutages: [{ start: 10_500, end: 14_000 }],
      gatewayClockOffsets: { 'gw-0-1': 2_000 },
    });
    expect(ahead.toldTwiceLedgerUnreachable.count).toBe(1);
  });
});

describe('when a request held on its way reaches the provider after its lease bound', () => {
  const LIMIT = { tenantId: TENANT, providerOperation: 'refund', maxConcurrent: 2 };
  const BOUND_MS = 5_500;

  /** Three refunds in progress at once at the sandbox; the last one's attempt was sent `lateByMs` earlier. */
  function threeAtOnce(lateByMs: number, extraAbove = 0): Partial<CheckInput> {
    const journal = new EffectJournal();
    journal.begin(TENANT, 'refund', { reference: 'op_a', attemptToken: 'tok_a' });
    journal.begin(TENANT, 'refund', { reference: 'op_b', attemptToken: 'tok_b' });
    journal.begin(TENANT, 'refund', { reference: 'op_c', attemptToken: 'tok_c1' });
    const report = journal.concurrencyReport();
    const refund = report.tenants[TENANT]?.operations.refund;
    if (refund === undefined) throw new Error('no refund concurrency recorded');
    refund.entered['3'] = (refund.entered['3'] ?? 0) + extraAbove;
    const arrivedAt = Date.parse(refund.overlaps?.at(-1)?.at ?? '');
    const sent = (id: string, token: string, at: number) =>
      view(id, 'COMMITTED', { attemptSentAt: { [token]: at } });
    return {
      concurrency: report,
      limits: [{ ...LIMIT, leaseBoundMs: BOUND_MS }],
      ledger: [
        sent('op_a', 'tok_a', arrivedAt - 100),
        sent('op_b', 'tok_b', arrivedAt - 50),
        sent('op_c', 'tok_c1', arrivedAt - lateByMs),
      ],
      intents: [],
    };
  }

  it('should count it apart when it arrived later than the bound after its send', () => {
    const result = check({ ...baseInput(), ...threeAtOnce(7_200) });
    expect(result.violations.provider_concurrency).toBe(0);
    expect(result.heldPastLeaseBound.count).toBe(1);
    expect(result.heldPastLeaseBound.examples[0]).toContain('op_c');
  });

  it('should count a violation when every request in progress was within its bound', () => {
    const result = check({ ...baseInput(), ...threeAtOnce(4_000) });
    expect(result.violations.provider_concurrency).toBe(1);
    expect(result.heldPastLeaseBound.count).toBe(0);
  });

  it('should count a violation for a request above the limit the sandbox kept no overlap of', () => {
    const result = check({ ...baseInput(), ...threeAtOnce(7_200, 1) });
    expect(result.violations.provider_concurrency).toBe(1);
    expect(result.heldPastLeaseBound.count).toBe(1);
  });
});

describe('when the sandbox keeps the overlaps of a busy action', () => {
  it('should keep those above the limit however many came at or below it', () => {
    const journal = new EffectJournal();
    const ends: (() => void)[] = [];
    // 300 overlaps at level 2 fill the level's quota; one at level 3 is still kept.
    for (let i = 0; i < 300; i++) {
      const first = journal.begin(TENANT, 'refund', { reference: `op_${i}` });
      journal.begin(TENANT, 'refund', { reference: `op_${i}b` })();
      first();
    }
    ends.push(journal.begin(TENANT, 'refund', { reference: 'x1' }));
    ends.push(journal.begin(TENANT, 'refund', { reference: 'x2' }));
    ends.push(journal.begin(TENANT, 'refund', { reference: 'x3' }));
    const overlaps = journal.concurrencyReport().tenants[TENANT]?.operations.refund?.overlaps ?? [];
    expect(overlaps.filter((o) => o.inProgress.length === 2)).toHaveLength(200);
    expect(overlaps.filter((o) => o.inProgress.length === 3)).toHaveLength(1);
    for (const end of ends) end();
  });
});

function baseInput(): CheckInput {
  return {
    intents: [],
    journal: [],
    effects: [],
    concurrency: { tenants: {} },
    limits: [],
    ledger: [],
    sms: [],
    webhooks: [],
  };
}
