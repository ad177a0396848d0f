import { describe, expect, it } from 'vitest';
import {
  CALL_PHASES,
  CallPhaseMachine,
  callerOnHold,
  canMove,
  linkUpPhase,
  type CallPhase,
  type PhaseChange,
} from '../../../gateway/call/call-phase.ts';

/** The lifecycle every call may take, written out move by move (the table in call-phase.ts must match). */
const LEGAL: readonly (readonly [CallPhase, CallPhase])[] = [
  ['opening_model', 'answering'],
  ['opening_model', 'ending'],
  ['opening_model', 'ended'],
  ['answering', 'live'],
  ['answering', 'on_hold'],
  ['answering', 'ending'],
  ['answering', 'ended'],
  ['live', 'on_hold'],
  ['live', 'renewing'],
  ['live', 'reopening'],
  ['live', 'saying_goodbye'],
  ['live', 'ending'],
  ['on_hold', 'live'],
  ['on_hold', 'renewing'],
  ['on_hold', 'reopening'],
  ['on_hold', 'saying_goodbye'],
  ['on_hold', 'ending'],
  ['renewing', 'live'],
  ['renewing', 'on_hold'],
  ['renewing', 'reopening'],
  ['renewing', 'saying_goodbye'],
  ['renewing', 'ending'],
  ['reopening', 'live'],
  ['reopening', 'on_hold'],
  ['reopening', 'saying_goodbye'],
  ['reopening', 'ending'],
  ['saying_goodbye', 'ending'],
  ['ending', 'ended'],
];

const isLegal = (from: CallPhase, to: CallPhase): boolean =>
  LEGAL.some(([f, t]) => f === from && t === to);
const allPairs = CALL_PHASES.flatMap((from) =>
  CALL_PHASES.filter((to) => to !== from).map((to) => [from, to] as const),
);

function machine(initial: CallPhase): {
  phases: CallPhaseMachine;
  changes: PhaseChange[];
  refused: PhaseChange[];
} {
  const changes: PhaseChange[] = [];
  const refused: PhaseChange[] = [];
  const phases = new CallPhaseMachine({
    initial,
    onChange: (c) => changes.push(c),
    onRefused: (c) => refused.push(c),
  });
  return { phases, changes, refused };
}

describe('the call phase table', () => {
  it.each(LEGAL)('should allow %s -> %s and report the change once', (from, to) => {
    const { phases, changes, refused } = machine(from);
    expect(phases.moveTo(to, 'test')).toBe(true);
    expect(phases.phase).toBe(to);
    expect(changes).toEqual([{ from, to, cause: 'test' }]);
    expect(refused).toEqual([]);
  });

  it.each(allPairs.filter(([from, to]) => !isLegal(from, to)))(
    'should refuse %s -> %s and stay where it is',
    (from, to) => {
      const { phases, changes, refused } = machine(from);
      expect(phases.moveTo(to, 'test')).toBe(false);
      expect(phases.phase).toBe(from);
      expect(changes).toEqual([]);
      expect(refused).toEqual([{ from, to, cause: 'test' }]);
    },
  );

  it('should hold exactly the written-out moves', () => {
    for (const [from, to] of allPairs)
      expect(canMove(from, to), `${from} -> ${to}`).toBe(isLegal(from, to));
  });

  it('should let every phase but ended reach the end', () => {
    for (const phase of CALL_PHASES.filter((p) => p !== 'ended' && p !== 'ending'))
      expect(canMove(phase, 'ending') || canMove(phase, 'saying_goodbye'), phase).toBe(true);
    expect(CALL_PHASES.filter((to) => canMove('ended', to))).toEqual([]);
  });

  it('should not report a move to the phase the call is already in', () => {
    const { phases, changes, refused } = machine('live');
    expect(phases.moveTo('live', 'test')).toBe(true);
    expect(changes).toEqual([]);
    expect(refused).toEqual([]);
  });

  it('should start opening the model while the call rings, and answer only from there', () => {
    expect(
      new CallPhaseMachine({ onChange: () => undefined, onRefused: () => undefined }).phase,
    ).toBe('opening_model');
    expect(CALL_PHASES.filter((from) => canMove(from, 'answering'))).toEqual(['opening_model']);
  });

  it('should reach a link up phase only through the answer once, after the first open', () => {
    expect(canMove('opening_model', 'live')).toBe(false);
    expect(canMove('opening_model', 'on_hold')).toBe(false);
  });
});

describe('when the model link comes up', () => {
  it.each([
    [false, false, 'live'],
    [false, true, 'renewing'],
    [true, false, 'on_hold'],
    [true, true, 'on_hold'],
  ] as const)(
    'should be in the phase the caller and the renewal say (holds: %s, renewal: %s -> %s)',
    (callerHolds, renewalPending, phase) => {
      expect(linkUpPhase({ callerHolds, renewalPending })).toBe(phase);
    },
  );
});

describe('what the gate sees of a hold', () => {
  it.each([
    ['live', false, false],
    ['on_hold', false, true],
    ['renewing', false, false],
    ['answering', true, true],
    ['opening_model', true, true],
    ['reopening', true, true],
    ['reopening', false, false],
    ['ending', true, true],
    ['saying_goodbye', false, false],
  ] as const)(
    'should read %s with the SDP saying held=%s as on hold=%s',
    (phase, callerHolds, held) => {
      expect(callerOnHold(phase, callerHolds)).toBe(held);
    },
  );
});
