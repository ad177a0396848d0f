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
    line += ' You changed your request after this one, but it did happen anyway: shall I change it?';
  }
  if (reasons.includes('handoff_agent_may_reveal')) line += ' This was started for you before you were transferred to me.';
  return line;
}

/** The text of an SMS or webhook when the caller can no longer hear it. */
export function describeForCaller(op: Operation): string {
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
