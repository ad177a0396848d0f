/**
 * The relevance gate (pure): given an operation that reached a result and a snapshot of the call,
 * decide what the conversation does with it. One decision, with the reasons that led to it; the
 * delivery records both on the operation and counts them.
 *
 * What it protects:
 *   - UNKNOWN is never announced as success or failure: reconcile first.
 *   - A superseded operation that did commit an effect is never dropped: the caller must learn the
 *     real state ("the 21:00 booking went through; shall I move it to 21:30?"). Nor is an undo
 *     (compensation) that failed: the effect it was to undo still stands.
 *   - Results reach the caller through the agent now active only if that agent may reveal them.
 *   - A caller who hung up, was transferred to a human, or whose gateway died hears nothing: the
 *     result goes out of band.
 *   - Nothing is said over the caller or over another response, or into a hold; nothing is said twice.
 *     A result held for the hold goes out of band if the call ends before the resume.
 */

export type RelevanceDecisionType =
  | 'speak_now'
  | 'speak_when_idle'
  | 'hold'
  | 'suppress'
  | 'reconcile_first'
  | 'route_to_active_agent'
  | 'deliver_out_of_band';

export type RelevanceReason =
  | 'committed'
  | 'failed'
  | 'cancelled'
  | 'outcome_unknown'
  | 'already_told'
  | 'superseded_no_effect'
  | 'superseded_with_effect'
  | 'undo_failed'
  | 'caller_hung_up'
  | 'transferred_to_human'
  | 'gateway_gone'
  | 'handoff_agent_may_reveal'
  | 'handoff_agent_may_not_reveal'
  | 'caller_speaking'
  | 'caller_on_hold'
  | 'response_active'
  | 'idle';

export interface RelevanceDecision {
  readonly decision: RelevanceDecisionType;
  readonly reasons: readonly RelevanceReason[];
}

/** What the gate needs of the operation. */
export interface GateOperation {
  readonly operationId: string;
  readonly action: string;
  readonly state: 'COMMITTED' | 'FAILED_FINAL' | 'CANCELLED' | 'UNKNOWN';
  /** The agent that started it. */
  readonly agent?: string;
  readonly goal?: string;
  /** Set on a compensation: the committed operation it undoes. */
  readonly compensates?: string;
}

/** What the gate needs of the call, at the moment of the decision. */
export interface SessionSnapshot {
  /** `gone`: no live session owns the call (the gateway died or the call is unknown here). */
  readonly call: 'active' | 'hung_up' | 'transferred' | 'gone';
  readonly activeAgent: string;
  /** Whether the active agent may reveal results of this operation's action. */
  readonly activeAgentMayReveal: boolean;
  readonly callerSpeaking: boolean;
  /** The caller holds the call (re-INVITE sendonly/inactive): nothing we send reaches them until the resume. */
  readonly callerOnHold: boolean;
  readonly responseActive: boolean;
  /** The caller has already been told this result (a duplicate event). */
  readonly alreadyTold: boolean;
  /** A newer operation for the same goal exists. */
  readonly superseded: boolean;
}

function outcomeReason(state: GateOperation['state']): RelevanceReason {
  switch (state) {
    case 'COMMITTED':
      return 'committed';
    case 'FAILED_FINAL':
      return 'failed';
    case 'CANCELLED':
      return 'cancelled';
    case 'UNKNOWN':
      return 'outcome_unknown';
  }
}

export function decideRelevance(op: GateOperation, session: SessionSnapshot): RelevanceDecision {
  const outcome = outcomeReason(op.state);
  if (session.alreadyTold) return { decision: 'suppress', reasons: ['already_told', outcome] };
  if (op.state === 'UNKNOWN') {
    const where: RelevanceReason[] =
      session.call === 'active' ? [] : [callGoneReason(session.call)];
    return { decision: 'reconcile_first', reasons: ['outcome_unknown', ...where] };
  }
  // An undo that failed leaves the original's effect in place: the caller must learn that as they
  // would learn of the effect itself (test/unit/agents/compensation-result.test.ts).
  const undoFailed = op.compensates !== undefined && op.state !== 'COMMITTED';
  const hasEffect = op.state === 'COMMITTED' || undoFailed;
  if (session.superseded && !hasEffect)
    return { decision: 'suppress', reasons: ['superseded_no_effect', outcome] };
  const reasons: RelevanceReason[] = undoFailed ? [outcome, 'undo_failed'] : [outcome];
  if (session.superseded) reasons.push('superseded_with_effect');
  if (session.call !== 'active')
    return { decision: 'deliver_out_of_band', reasons: [callGoneReason(session.call), ...reasons] };

  const handedOff = op.agent !== undefined && op.agent !== session.activeAgent;
  if (handedOff && !session.activeAgentMayReveal) {
    // The caller must still learn of a real effect; anything else can wait for an agent that may say it.
    return hasEffect
      ? { decision: 'deliver_out_of_band', reasons: ['handoff_agent_may_not_reveal', ...reasons] }
      : { decision: 'hold', reasons: ['handoff_agent_may_not_reveal', ...reasons] };
  }
  if (handedOff) reasons.unshift('handoff_agent_may_reveal');
  // Spoken into a hold it would be "told" unheard: it waits for the resume (the call's end sends it out of band).
  if (session.callerOnHold) return { decision: 'hold', reasons: [...reasons, 'caller_on_hold'] };
  const busy: RelevanceReason[] = [];
  if (session.callerSpeaking) busy.push('caller_speaking');
  if (session.responseActive) busy.push('response_active');
  if (handedOff)
    return {
      decision: 'route_to_active_agent',
      reasons: [...reasons, ...(busy.length > 0 ? busy : ['idle' as const])],
    };
  if (busy.length > 0) return { decision: 'speak_when_idle', reasons: [...reasons, ...busy] };
  return { decision: 'speak_now', reasons: [...reasons, 'idle'] };
}

function callGoneReason(call: Exclude<SessionSnapshot['call'], 'active'>): RelevanceReason {
  switch (call) {
    case 'hung_up':
      return 'caller_hung_up';
    case 'transferred':
      return 'transferred_to_human';
    case 'gone':
      return 'gateway_gone';
  }
}
