/** Tools every sandbox agent has: status and cancellation of operations, transfer and handoff. */
import { z } from 'zod';
import { tool } from '../agent.ts';

export const operationStatus = tool({
  name: 'operation_status',
  description:
    'Tell the state of an operation started earlier in this call (booking, refund, ...). Never guess a state.',
  parameters: z.object({ operation_id: z.string().min(1).max(64) }),
  control: 'operation_status',
});

export const cancelOperation = tool({
  name: 'cancel_operation',
  description:
    'Cancel an operation started in this call. The answer says whether it was cancelled, only requested, cannot be cancelled while running, or already happened (then offer to undo it).',
  parameters: z.object({ operation_id: z.string().min(1).max(64) }),
  control: 'cancel_operation',
});

export const transferToHuman = tool({
  name: 'transfer_to_human',
  description:
    'Transfer the caller to a person at the front desk. Operations in progress continue; their results follow by message.',
  parameters: z.object({ reason: z.string().max(200).optional() }),
  control: 'transfer_to_human',
});

export const handoff = tool({
  name: 'handoff',
  description: 'Hand the call to another agent of this line (reservations, billing, concierge).',
  parameters: z.object({ agent: z.string().min(1).max(64) }),
  control: 'handoff',
});

export const COMMON_TOOLS = [operationStatus, cancelOperation, transferToHuman, handoff];
