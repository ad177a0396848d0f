/**
 * The call's lifecycle as data: one union of phases and one table of the moves between them.
 * Pure: the call changes phase only through `CallPhaseMachine.moveTo`, which checks the table and
 * reports each change (test/unit/call/call-phase.test.ts pins every legal and illegal move).
 *
 * The model link and the caller's hold share the union because they decide the same thing: what
 * may be said now. `on_hold` is the link up while the caller holds; a hold that begins while the
 * link is still being opened or re-opened is remembered by the call (the SDP direction) and taken
 * up when the link comes up (see `linkUpPhase`).
 */

export type CallPhase =
  /**
   * The caller hears ringing while the media ports and the first model session are opened
   * (bounded by gateway.setupTimeoutMs); nothing is answered yet.
   */
  | 'opening_model'
  /** The model session is ready: the 200 is sent, and the conversation begins. */
  | 'answering'
  /** The model serves the caller. */
  | 'live'
  /** The model serves, but the caller holds the call: nothing sent reaches them. */
  | 'on_hold'
  /** The model session is about to expire; a standby takes over at the next quiet moment. */
  | 'renewing'
  /** The model session was lost; a new one is being opened with the call's summary. */
  | 'reopening'
  /** The model cannot be had again: the goodbye prompt plays, then the call ends. */
  | 'saying_goodbye'
  /** The BYE is on its way and everything the call held is being released. */
  | 'ending'
  /** Everything is released; delivery knows the call is over. */
  | 'ended';

export const CALL_PHASES: readonly CallPhase[] = [
  'opening_model',
  'answering',
  'live',
  'on_hold',
  'renewing',
  'reopening',
  'saying_goodbye',
  'ending',
  'ended',
];

/** Either side may end the call from any phase before `ending`; only `ending` leads to `ended`. */
const TRANSITIONS: Readonly<Record<CallPhase, readonly CallPhase[]>> = {
  // A call is answered only once its model can speak; a setup that fails or runs out of time is
  // refused (a final error response) and ends without an answer (test/unit/call/call-setup.test.ts).
  opening_model: ['answering', 'ending', 'ended'],
  // The 200 could not be sent (the caller cancelled in between): the call ends unanswered.
  answering: ['live', 'on_hold', 'ending', 'ended'],
  live: ['on_hold', 'renewing', 'reopening', 'saying_goodbye', 'ending'],
  on_hold: ['live', 'renewing', 'reopening', 'saying_goodbye', 'ending'],
  // A renewal is over when the standby took over (live, or on hold) or the session was lost first.
  renewing: ['live', 'on_hold', 'reopening', 'saying_goodbye', 'ending'],
  // A failed re-open says goodbye; a re-open that came back resumes where the caller is.
  reopening: ['live', 'on_hold', 'saying_goodbye', 'ending'],
  saying_goodbye: ['ending'],
  ending: ['ended'],
  ended: [],
};

export function canMove(from: CallPhase, to: CallPhase): boolean {
  return TRANSITIONS[from].includes(to);
}

/** What the phase is once the model link is up (opened, re-opened, renewed, or a hold changed). */
export function linkUpPhase(state: {
  readonly callerHolds: boolean;
  readonly renewalPending: boolean;
}): CallPhase {
  if (state.callerHolds) return 'on_hold';
  return state.renewalPending ? 'renewing' : 'live';
}

/** The model serves the call (it may speak and be spoken to). */
export function isLinkUp(phase: CallPhase): boolean {
  return phase === 'live' || phase === 'on_hold' || phase === 'renewing';
}

/** A model session is being connected and configured: its loss is that open's failure, owned by whoever awaits it. */
export function isOpeningLink(phase: CallPhase): boolean {
  return phase === 'opening_model' || phase === 'reopening';
}

/** The call is on its way out: nothing new is said or asked of the model. */
export function isEnding(phase: CallPhase): boolean {
  return phase === 'ending' || phase === 'ended';
}

/** The goodbye has begun or the call is ending: no re-open, no apology. */
export function isLeaving(phase: CallPhase): boolean {
  return phase === 'saying_goodbye' || isEnding(phase);
}

export interface PhaseChange {
  readonly from: CallPhase;
  readonly to: CallPhase;
  readonly cause: string;
}

export interface CallPhaseMachineOptions {
  readonly initial?: CallPhase;
  /** Called for every change the table allows, after the phase changed. */
  readonly onChange: (change: PhaseChange) => void;
  /** Called for a move the table refuses; the phase stays what it was. */
  readonly onRefused: (change: PhaseChange) => void;
}

/**
 * Holds the phase. A move the table does not allow is refused and reported, not thrown: the call
 * goes on in the phase it is in, which the table guarantees is one it can leave by ending (a
 * refused move is a bug in the call, and a crash would drop the caller and their results).
 * Moving to the phase the call is already in is not a change and is not reported.
 */
export class CallPhaseMachine {
  private current: CallPhase;
  private readonly options: CallPhaseMachineOptions;

  constructor(options: CallPhaseMachineOptions) {
    this.options = options;
    this.current = options.initial ?? 'opening_model';
  }

  get phase(): CallPhase {
    return this.current;
  }

  /** True when the call is now in `to` (moved, or already there); false when the table refused. */
  moveTo(to: CallPhase, cause: string): boolean {
    const from = this.current;
    if (from === to) return true;
    if (!canMove(from, to)) {
      this.options.onRefused({ from, to, cause });
      return false;
    }
    this.current = to;
    this.options.onChange({ from, to, cause });
    return true;
  }
}

/**
 * Whether nothing the call sends reaches the caller, for the gate (`caller_on_hold`): the phase
 * says so while the model link is up; before it is up (opening, answering, re-opening) and while
 * leaving, the last SDP direction does, which the phase takes up once the link is up.
 */
export function callerOnHold(phase: CallPhase, callerHolds: boolean): boolean {
  return isLinkUp(phase) ? phase === 'on_hold' : callerHolds;
}
