import { describe, expect, it } from 'vitest';
import {
  decideRelevance,
  type GateOperation,
  type SessionSnapshot,
} from '../../../agents/relevance-gate.ts';
import { describeForCaller, describeForModel } from '../../../agents/result-wording.ts';
import type { Operation } from '../../../jobs/ledger/operation.ts';

const undo = (overrides: Partial<GateOperation> = {}): GateOperation => ({
  operationId: 'op_undo',
  action: 'cancel_booking',
  state: 'FAILED_FINAL',
  agent: 'reservations',
  compensates: 'op_booking',
  ...overrides,
});
const session = (overrides: Partial<SessionSnapshot> = {}): SessionSnapshot => ({
  call: 'active',
  activeAgent: 'reservations',
  activeAgentMayReveal: true,
  callerSpeaking: false,
  responseActive: false,
  alreadyTold: false,
  superseded: false,
  callerOnHold: false,
  ...overrides,
});

describe('when the gate decides on the result of a compensation', () => {
  it.each([
    [
      'an undo that went through',
      undo({ state: 'COMMITTED' }),
      session(),
      'speak_now',
      ['committed', 'idle'],
    ],
    ['an undo that failed', undo(), session(), 'speak_now', ['failed', 'undo_failed', 'idle']],
    [
      'an undo cancelled before it ran',
      undo({ state: 'CANCELLED' }),
      session(),
      'speak_now',
      ['cancelled', 'undo_failed', 'idle'],
    ],
    // Like an effect the active agent may not reveal: the caller must still learn it, by message.
    [
      'a failed undo after handoff to an agent that may not reveal it',
      undo(),
      session({ activeAgent: 'billing', activeAgentMayReveal: false }),
      'deliver_out_of_band',
      ['handoff_agent_may_not_reveal', 'failed', 'undo_failed'],
    ],
    [
      'a failed undo after hang-up',
      undo(),
      session({ call: 'hung_up' }),
      'deliver_out_of_band',
      ['caller_hung_up', 'failed', 'undo_failed'],
    ],
    [
      'a failed undo of a superseded goal',
      undo(),
      session({ superseded: true }),
      'speak_now',
      ['failed', 'undo_failed', 'superseded_with_effect', 'idle'],
    ],
  ] as const)('should handle %s', (_name, operation, snapshot, decision, reasons) => {
    expect(decideRelevance(operation, snapshot)).toEqual({ decision, reasons });
  });
});

const operation = (overrides: Partial<Operation>): Operation =>
  ({
    operationId: 'op_undo',
    tenantId: 'demo',
    action: 'cancel_booking',
    compensates: 'op_booking',
    state: 'FAILED_FINAL',
    error: {
      code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
      message: 'the bookings service is unavailable',
    },
    ...overrides,
  }) as Operation;

describe('when the result of a compensation is worded', () => {
  it.each([
    ['FAILED_FINAL', operation({})],
    ['CANCELLED', operation({ state: 'CANCELLED', error: undefined })],
  ] as const)(
    'should say a %s undo did not undo the earlier request, which still stands',
    (_state, op) => {
      const said = describeForModel(op, ['failed', 'undo_failed']);
      expect(said).toContain('did not go through');
      expect(said).toContain('op_booking was NOT undone and still stands');
      expect(said).not.toMatch(/went through|is undone/);
      const texted = describeForCaller(op);
      expect(texted).toContain(
        'We could not undo your earlier request op_booking: it still stands.',
      );
      expect(texted).not.toMatch(/confirmed|is undone/);
    },
  );

  it('should say a committed undo undid the earlier request', () => {
    const op = operation({
      state: 'COMMITTED',
      error: undefined,
      result: { booking_id: 'bk_000001', status: 'cancelled' },
    });
    expect(describeForModel(op, ['committed'])).toBe(
      'The booking cancellation op_undo went through (booking id bk_000001, status cancelled): the earlier request op_booking is undone.',
    );
    expect(describeForCaller(op)).toContain('Your earlier request op_booking is undone');
  });

  it('should not say whether an undo still being confirmed worked', () => {
    expect(describeForModel(operation({ state: 'UNKNOWN' }), ['outcome_unknown'])).toBe(
      'The booking cancellation op_undo is still being confirmed. Do not say whether the earlier request op_booking was undone.',
    );
  });
});
