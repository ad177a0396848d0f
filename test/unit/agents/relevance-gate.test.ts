import { describe, expect, it } from 'vitest';
import {
  decideRelevance,
  type GateOperation,
  type SessionSnapshot,
} from '../../../agents/relevance-gate.ts';

const op = (overrides: Partial<GateOperation> = {}): GateOperation => ({
  operationId: 'op_1',
  action: 'book_table',
  state: 'COMMITTED',
  agent: 'reservations',
  goal: 'booking',
  ...overrides,
});
const session = (overrides: Partial<SessionSnapshot> = {}): SessionSnapshot => ({
  call: 'active',
  activeAgent: 'reservations',
  activeAgentMayReveal: true,
  callerSpeaking: false,
  callerOnHold: false,
  responseActive: false,
  alreadyTold: false,
  superseded: false,
  ...overrides,
});

describe('when the gate decides on a named situation', () => {
  it.each([
    ['a commit while the caller is silent', op(), session(), 'speak_now', ['committed', 'idle']],
    [
      'a commit while the caller speaks',
      op(),
      session({ callerSpeaking: true }),
      'speak_when_idle',
      ['committed', 'caller_speaking'],
    ],
    [
      'a commit while the agent is talking',
      op(),
      session({ responseActive: true }),
      'speak_when_idle',
      ['committed', 'response_active'],
    ],
    [
      'a failure while idle',
      op({ state: 'FAILED_FINAL' }),
      session(),
      'speak_now',
      ['failed', 'idle'],
    ],
    [
      'an UNKNOWN result',
      op({ state: 'UNKNOWN' }),
      session(),
      'reconcile_first',
      ['outcome_unknown'],
    ],
    [
      'an UNKNOWN result after hang-up',
      op({ state: 'UNKNOWN' }),
      session({ call: 'hung_up' }),
      'reconcile_first',
      ['outcome_unknown', 'caller_hung_up'],
    ],
    [
      'a duplicate event',
      op(),
      session({ alreadyTold: true }),
      'suppress',
      ['already_told', 'committed'],
    ],
    [
      'a superseded booking that failed',
      op({ state: 'FAILED_FINAL' }),
      session({ superseded: true }),
      'suppress',
      ['superseded_no_effect', 'failed'],
    ],
    [
      'a superseded booking that was cancelled',
      op({ state: 'CANCELLED' }),
      session({ superseded: true }),
      'suppress',
      ['superseded_no_effect', 'cancelled'],
    ],
    [
      'a superseded booking that went through',
      op(),
      session({ superseded: true }),
      'speak_now',
      ['committed', 'superseded_with_effect', 'idle'],
    ],
    [
      'a superseded commit while the caller speaks',
      op(),
      session({ superseded: true, callerSpeaking: true }),
      'speak_when_idle',
      ['committed', 'superseded_with_effect', 'caller_speaking'],
    ],
    [
      'a commit after hang-up',
      op(),
      session({ call: 'hung_up' }),
      'deliver_out_of_band',
      ['caller_hung_up', 'committed'],
    ],
    [
      'a failure after transfer to a human',
      op({ state: 'FAILED_FINAL' }),
      session({ call: 'transferred' }),
      'deliver_out_of_band',
      ['transferred_to_human', 'failed'],
    ],
    [
      'a commit whose gateway died',
      op(),
      session({ call: 'gone' }),
      'deliver_out_of_band',
      ['gateway_gone', 'committed'],
    ],
    [
      'a superseded effect after hang-up',
      op(),
      session({ call: 'hung_up', superseded: true }),
      'deliver_out_of_band',
      ['caller_hung_up', 'committed', 'superseded_with_effect'],
    ],
    [
      'a commit after handoff to an agent that may reveal it',
      op(),
      session({ activeAgent: 'billing' }),
      'route_to_active_agent',
      ['handoff_agent_may_reveal', 'committed', 'idle'],
    ],
    [
      'a commit after handoff while the caller speaks',
      op(),
      session({ activeAgent: 'billing', callerSpeaking: true }),
      'route_to_active_agent',
      ['handoff_agent_may_reveal', 'committed', 'caller_speaking'],
    ],
    [
      'a commit after handoff to an agent that may not reveal it',
      op(),
      session({ activeAgent: 'billing', activeAgentMayReveal: false }),
      'deliver_out_of_band',
      ['handoff_agent_may_not_reveal', 'committed'],
    ],
    [
      'a failure after handoff to an agent that may not reveal it',
      op({ state: 'FAILED_FINAL' }),
      session({ activeAgent: 'billing', activeAgentMayReveal: false }),
      'hold',
      ['handoff_agent_may_not_reveal', 'failed'],
    ],
    [
      'a commit while the caller holds the call',
      op(),
      session({ callerOnHold: true }),
      'hold',
      ['committed', 'caller_on_hold'],
    ],
    [
      'a failure while the caller holds the call',
      op({ state: 'FAILED_FINAL' }),
      session({ callerOnHold: true }),
      'hold',
      ['failed', 'caller_on_hold'],
    ],
    [
      'a commit while held and the agent still talks into the hold',
      op(),
      session({ callerOnHold: true, responseActive: true }),
      'hold',
      ['committed', 'caller_on_hold'],
    ],
    [
      'a superseded effect while held',
      op(),
      session({ callerOnHold: true, superseded: true }),
      'hold',
      ['committed', 'superseded_with_effect', 'caller_on_hold'],
    ],
    [
      'a commit after handoff while held',
      op(),
      session({ callerOnHold: true, activeAgent: 'billing' }),
      'hold',
      ['handoff_agent_may_reveal', 'committed', 'caller_on_hold'],
    ],
    [
      'a commit after the caller hung up from a hold',
      op(),
      session({ callerOnHold: true, call: 'hung_up' }),
      'deliver_out_of_band',
      ['caller_hung_up', 'committed'],
    ],
    [
      'a duplicate event while held',
      op(),
      session({ callerOnHold: true, alreadyTold: true }),
      'suppress',
      ['already_told', 'committed'],
    ],
    [
      'an UNKNOWN result while held',
      op({ state: 'UNKNOWN' }),
      session({ callerOnHold: true }),
      'reconcile_first',
      ['outcome_unknown'],
    ],
  ] as const)('should handle %s', (_name, operation, snapshot, decision, reasons) => {
    expect(decideRelevance(operation, snapshot)).toEqual({ decision, reasons });
  });
});

describe('when every combination of inputs is tried', () => {
  const states = ['COMMITTED', 'FAILED_FINAL', 'CANCELLED', 'UNKNOWN'] as const;
  const calls = ['active', 'hung_up', 'transferred', 'gone'] as const;
  const bools = [false, true];
  const all: [GateOperation, SessionSnapshot][] = [];
  for (const state of states)
    for (const call of calls)
      for (const handedOff of bools)
        for (const activeAgentMayReveal of bools)
          for (const callerSpeaking of bools)
            for (const responseActive of bools)
              for (const callerOnHold of bools)
                for (const alreadyTold of bools)
                  for (const superseded of bools)
                    all.push([
                      op({ state }),
                      session({
                        call,
                        activeAgent: handedOff ? 'billing' : 'reservations',
                        activeAgentMayReveal,
                        callerSpeaking,
                        callerOnHold,
                        responseActive,
                        alreadyTold,
                        superseded,
                      }),
                    ]);

  it('should cover 2048 combinations, each with exactly one decision and at least one reason', () => {
    expect(all).toHaveLength(2048);
    for (const [o, s] of all) expect(decideRelevance(o, s).reasons.length).toBeGreaterThan(0);
  });

  it('should never announce an UNKNOWN outcome', () => {
    for (const [o, s] of all.filter(([o]) => o.state === 'UNKNOWN')) {
      expect(['reconcile_first', 'suppress']).toContain(decideRelevance(o, s).decision);
    }
  });

  it('should never drop a committed effect the caller has not been told', () => {
    for (const [o, s] of all.filter(([o, s]) => o.state === 'COMMITTED' && !s.alreadyTold)) {
      expect(decideRelevance(o, s).decision).not.toBe('suppress');
    }
  });

  it('should never speak into a call that is over, and send every told-worthy result of such a call out of band', () => {
    for (const [o, s] of all.filter(([, s]) => s.call !== 'active')) {
      const { decision } = decideRelevance(o, s);
      expect(['speak_now', 'speak_when_idle', 'route_to_active_agent', 'hold']).not.toContain(
        decision,
      );
      if (o.state !== 'UNKNOWN' && !s.alreadyTold && !(s.superseded && o.state !== 'COMMITTED'))
        expect(decision).toBe('deliver_out_of_band');
    }
  });

  it('should speak now only when nobody is speaking', () => {
    for (const [o, s] of all) {
      if (decideRelevance(o, s).decision === 'speak_now') {
        expect(s.callerSpeaking || s.responseActive).toBe(false);
        expect(s.call).toBe('active');
      }
    }
  });

  it('should never speak into a hold, and hold every result that would be spoken', () => {
    for (const [o, s] of all.filter(([, s]) => s.callerOnHold)) {
      const { decision, reasons } = decideRelevance(o, s);
      expect(['speak_now', 'speak_when_idle', 'route_to_active_agent']).not.toContain(decision);
      const heldCopy = { ...s, callerOnHold: false };
      if (
        ['speak_now', 'speak_when_idle', 'route_to_active_agent'].includes(
          decideRelevance(o, heldCopy).decision,
        )
      ) {
        expect({ decision, onHold: reasons.includes('caller_on_hold') }).toEqual({
          decision: 'hold',
          onHold: true,
        });
      }
    }
  });

  it('should never let an agent that may not reveal a result speak it', () => {
    for (const [o, s] of all.filter(
      ([, s]) => s.activeAgent === 'billing' && !s.activeAgentMayReveal,
    )) {
      expect(['speak_now', 'speak_when_idle', 'route_to_active_agent']).not.toContain(
        decideRelevance(o, s).decision,
      );
    }
  });

  it('should suppress every duplicate', () => {
    for (const [o, s] of all.filter(([, s]) => s.alreadyTold))
      expect(decideRelevance(o, s).decision).toBe('suppress');
  });
});
