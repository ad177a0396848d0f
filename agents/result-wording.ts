/**
 * Words for results (pure): what the model is told to say, and the message a caller gets when
 * they can no longer be told on the call.
 */
import type { Operation } from '../jobs/ledger/operation.ts';

const ACTION_NAMES: Readonly<Record<string, string>> = {
  book_table: 'table booking',
  cancel_booking: 'booking cancellation',
  refund: 'refund',
  check_availability: 'availability check',
  lookup_order: 'order lookup',
};

function name(op: Pick<Operation, 'action'>): string {
  return ACTION_NAMES[op.action] ?? op.action.replace(/_/g, ' ');
}

function details(result: Readonly<Record<string, unknown>> | undefined): string {
  if (!result) return '';
  const parts = Object.entries(result)
    .filter(([, v]) => typeof v === 'string' || typeof v === 'number')
    .slice(0, 6)
    .map(([k, v]) => `${k.replace(/_/g, ' ')} ${String(v)}`);
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

/**
 * The system message that makes the model tell the caller (the agents' instructions say to tell
 * results as they come; the message carries the facts and, where it matters, what to ask).
 */
export function describeForModel(op: Operation, reasons: readonly string[]): string {
  const what = `The ${name(op)} ${op.operationId}`;
  if (op.compensates !== undefined) return describeUndoForModel(op, what);
  let line: string;
  switch (op.state) {
    case 'COMMITTED':
      line = `${what} went through${details(op.result)}.`;
      break;
    case 'FAILED_FINAL':
      line = `${what} did not go through: ${op.error?.message ?? 'it failed'}.`;
      break;
    case 'CANCELLED':
      line = `${what} was cancelled; nothing was done.`;
      break;
    default:
      line = `${what} is still being confirmed. Do not say whether it worked.`;
  }
  // Worded to be read aloud as it is (the local simulator does), and to steer a real model.
  if (reasons.includes('superseded_with_effect')) {
    line +=
      ' You changed your request after this one, but it did happen anyway: shall I change it?';
  }
  if (reasons.includes('handoff_agent_may_reveal'))
    line += ' This was started for you before you were transferred to me.';
  return line;
}

/**
 * A compensation undoes an earlier operation: its result is told as what became of that one. A
 * failed undo is never worded as a success: the earlier operation still stands.
 */
function describeUndoForModel(op: Operation, what: string): string {
  const earlier = `the earlier request ${op.compensates ?? ''}`;
  switch (op.state) {
    case 'COMMITTED':
      return `${what} went through${details(op.result)}: ${earlier} is undone.`;
    case 'FAILED_FINAL':
    case 'CANCELLED':
      return `${what} did not go through${op.state === 'FAILED_FINAL' ? `: ${op.error?.message ?? 'it failed'}` : ''}. ${earlier} was NOT undone and still stands; tell the caller so, and that a person will follow up.`;
    default:
      return `${what} is still being confirmed. Do not say whether ${earlier} was undone.`;
  }
}

/** The text of an SMS or webhook when the caller can no longer hear it. */
export function describeForCaller(op: Operation): string {
  if (op.compensates !== undefined) {
    switch (op.state) {
      case 'COMMITTED':
        return `Your earlier request ${op.compensates} is undone (${name(op)}${details(op.result)}). Reference ${op.operationId}.`;
      case 'FAILED_FINAL':
      case 'CANCELLED':
        return `We could not undo your earlier request ${op.compensates}: it still stands. We will contact you about it. Reference ${op.operationId}.`;
      default:
        return `We are still undoing your earlier request ${op.compensates}; we will message you again. Reference ${op.operationId}.`;
    }
  }
  switch (op.state) {
    case 'COMMITTED':
      return `Your ${name(op)} is confirmed${details(op.result)}. Reference ${op.operationId}.`;
    case 'FAILED_FINAL':
      return `Your ${name(op)} could not be completed: ${op.error?.message ?? 'it failed'}. Reference ${op.operationId}.`;
    case 'CANCELLED':
      return `Your ${name(op)} was cancelled; nothing was charged or booked. Reference ${op.operationId}.`;
    default:
      return `We are still confirming your ${name(op)}; we will message you again. Reference ${op.operationId}.`;
  }
}
