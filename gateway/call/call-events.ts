/**
 * What a CallSession reports about its call, as one discriminated union with small factories.
 * These are the call's own milestones (signaling, media, model, tools); operation states and gate
 * decisions live in the ledger and the audit trail and are joined with these in the timeline.
 */
import type { DialogEndReason, TransferOutcome } from '../sip/signaling-driver.ts';
import type { DisconnectReason } from '../realtime/realtime-session.ts';
import type { CallPhase } from './call-phase.ts';
import type { CallPromptKind } from './call-prompts.ts';

/** Why a call ended, from the call's point of view (the dialog's reason is kept beside it). */
export type CallEndReason =
  | 'caller_hung_up'
  | 'agent_hung_up'
  | 'transferred'
  | 'media_timeout'
  | 'model_lost'
  | 'rejected'
  | 'shutdown'
  | 'failed';

export type CallEvent =
  | {
      readonly type: 'answered';
      readonly codec: string;
      readonly passthrough: boolean;
      readonly rtpPort: number;
    }
  | { readonly type: 'rejected'; readonly status: number; readonly reason: string }
  | { readonly type: 'model_ready'; readonly attempt: number; readonly agent: string }
  | { readonly type: 'dtmf'; readonly digit: string; readonly source: 'rtp' | 'sip-info' }
  | { readonly type: 'caller_speech'; readonly state: 'started' | 'stopped' }
  /** The caller spoke over the agent: response cancelled, playout cleared, item truncated. */
  | {
      readonly type: 'barge_in';
      readonly itemId: string | undefined;
      readonly playedMs: number | undefined;
      readonly droppedMs: number;
    }
  /** The process stalled (rtp.stallCutMs): what the agent was saying was dropped and truncated. */
  | {
      readonly type: 'playout_stalled';
      readonly gapMs: number;
      readonly itemId: string;
      readonly sentMs: number;
    }
  | {
      readonly type: 'response';
      readonly state: 'created' | 'done';
      readonly responseId: string;
      readonly status?: string;
    }
  | {
      readonly type: 'tool_call';
      readonly name: string;
      readonly callId: string;
      readonly status: string;
      readonly operationId?: string;
    }
  | { readonly type: 'agent_changed'; readonly from: string; readonly to: string }
  | { readonly type: 'transfer'; readonly target: string; readonly outcome: TransferOutcome }
  | {
      readonly type: 'result_spoken';
      readonly operationId: string;
      readonly status: string;
      readonly responseId?: string;
    }
  | {
      readonly type: 'model_disconnected';
      readonly reason: DisconnectReason;
      readonly detail: string;
      readonly willReopen: boolean;
    }
  /** The provider announced the end of the model session; it is renewed at the next quiet moment. */
  | { readonly type: 'model_expiring'; readonly remainingMs: number }
  /** A new model session took over from one about to expire, with the call's summary, unnoticed by the caller. */
  | { readonly type: 'model_renewed'; readonly attempt: number; readonly agent: string }
  /** callgate said a fixed line itself (no model): an apology while re-opening, or a goodbye. */
  | {
      readonly type: 'prompt';
      readonly kind: CallPromptKind;
      readonly audio: 'speech' | 'silence';
      readonly ms: number;
    }
  /** The caller put the call on hold (a re-INVITE sendonly/inactive: nothing we send reaches them) or resumed it. */
  | { readonly type: 'hold'; readonly state: 'held' | 'resumed' }
  /** A re-INVITE changed the codec of the live call (passthrough: no transcoding for the model). */
  | {
      readonly type: 'codec_changed';
      readonly from: string;
      readonly to: string;
      readonly passthrough: boolean;
    }
  /** What the agent said in one response, as the model transcribed its own audio. */
  | { readonly type: 'agent_said'; readonly responseId: string | undefined; readonly text: string }
  /** The call moved from one phase of its lifecycle to another (call-phase.ts); `cause` says what moved it. */
  | {
      readonly type: 'phase_changed';
      readonly from: CallPhase;
      readonly to: CallPhase;
      readonly cause: string;
    }
  | {
      readonly type: 'ended';
      readonly reason: CallEndReason;
      readonly dialogReason?: DialogEndReason;
    };

/** A call event with when it happened (ms since epoch) and the call it belongs to. */
export interface CallEventRecord {
  readonly at: number;
  readonly sessionId: string;
  readonly event: CallEvent;
}

export const callEvents = {
  answered: (codec: string, passthrough: boolean, rtpPort: number): CallEvent => ({
    type: 'answered',
    codec,
    passthrough,
    rtpPort,
  }),
  rejected: (status: number, reason: string): CallEvent => ({ type: 'rejected', status, reason }),
  modelReady: (attempt: number, agent: string): CallEvent => ({
    type: 'model_ready',
    attempt,
    agent,
  }),
  dtmf: (digit: string, source: 'rtp' | 'sip-info'): CallEvent => ({ type: 'dtmf', digit, source }),
  callerSpeech: (state: 'started' | 'stopped'): CallEvent => ({ type: 'caller_speech', state }),
  bargeIn: (
    itemId: string | undefined,
    playedMs: number | undefined,
    droppedMs: number,
  ): CallEvent => ({ type: 'barge_in', itemId, playedMs, droppedMs }),
  playoutStalled: (gapMs: number, itemId: string, sentMs: number): CallEvent => ({
    type: 'playout_stalled',
    gapMs,
    itemId,
    sentMs,
  }),
  response: (state: 'created' | 'done', responseId: string, status?: string): CallEvent => ({
    type: 'response',
    state,
    responseId,
    ...(status !== undefined && { status }),
  }),
  toolCall: (name: string, callId: string, status: string, operationId?: string): CallEvent => ({
    type: 'tool_call',
    name,
    callId,
    status,
    ...(operationId !== undefined && { operationId }),
  }),
  agentChanged: (from: string, to: string): CallEvent => ({ type: 'agent_changed', from, to }),
  transfer: (target: string, outcome: TransferOutcome): CallEvent => ({
    type: 'transfer',
    target,
    outcome,
  }),
  resultSpoken: (operationId: string, status: string, responseId?: string): CallEvent => ({
    type: 'result_spoken',
    operationId,
    status,
    ...(responseId !== undefined && { responseId }),
  }),
  modelDisconnected: (
    reason: DisconnectReason,
    detail: string,
    willReopen: boolean,
  ): CallEvent => ({ type: 'model_disconnected', reason, detail, willReopen }),
  modelExpiring: (remainingMs: number): CallEvent => ({ type: 'model_expiring', remainingMs }),
  modelRenewed: (attempt: number, agent: string): CallEvent => ({
    type: 'model_renewed',
    attempt,
    agent,
  }),
  prompt: (kind: CallPromptKind, audio: 'speech' | 'silence', ms: number): CallEvent => ({
    type: 'prompt',
    kind,
    audio,
    ms,
  }),
  hold: (state: 'held' | 'resumed'): CallEvent => ({ type: 'hold', state }),
  codecChanged: (from: string, to: string, passthrough: boolean): CallEvent => ({
    type: 'codec_changed',
    from,
    to,
    passthrough,
  }),
  agentSaid: (responseId: string | undefined, text: string): CallEvent => ({
    type: 'agent_said',
    responseId,
    text,
  }),
  phaseChanged: (from: CallPhase, to: CallPhase, cause: string): CallEvent => ({
    type: 'phase_changed',
    from,
    to,
    cause,
  }),
  ended: (reason: CallEndReason, dialogReason?: DialogEndReason): CallEvent => ({
    type: 'ended',
    reason,
    ...(dialogReason !== undefined && { dialogReason }),
  }),
};
