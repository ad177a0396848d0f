/**
 * The agents of the demo tenant, against the sandbox systems of record: a concierge that greets and
 * routes, reservations (availability, booking, cancelling) and billing (orders, refunds).
 */
import { z } from 'zod';
import { tool, type AgentDefinition } from '../agent.ts';
import { COMMON_TOOLS } from './common-tools.ts';

const date = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a date as YYYY-MM-DD');
const time = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'a time as HH:MM');
const restaurant = z.enum(['trattoria-roma', 'sushi-kaito', 'bistro-nord']);

export const checkAvailability = tool({
  name: 'check_availability',
  description: 'Free tables at a restaurant on a date (and time). Reading only: nothing is booked.',
  parameters: z.object({
    restaurant,
    date,
    time: time.optional(),
    party_size: z.int().min(1).max(20).optional(),
  }),
  action: 'check_availability',
});

export const bookTable = tool({
  name: 'book_table',
  description:
    'Book a table. Answers at once with an operation id; the confirmation follows. Asking again for the same booking does not book twice. To change a booking, book the new time: the earlier one is cancelled for you.',
  parameters: z.object({
    restaurant,
    date,
    time,
    party_size: z.int().min(1).max(20),
    name: z.string().min(1).max(80),
  }),
  action: 'book_table',
  intent: ['restaurant', 'date', 'time', 'party_size'],
  goal: (args) => `booking:${String(args.restaurant)}:${String(args.date)}`,
  compensation: { action: 'cancel_booking', args: (result) => ({ booking_id: result.booking_id }) },
});

export const cancelBooking = tool({
  name: 'cancel_booking',
  description: 'Cancel a confirmed booking by its booking id.',
  parameters: z.object({ booking_id: z.string().min(1).max(64) }),
  action: 'cancel_booking',
  intent: ['booking_id'],
});

export const lookupOrder = tool({
  name: 'lookup_order',
  description: 'Look an order up by its id (ord_NNNN): total and what was refunded.',
  parameters: z.object({ order_id: z.string().regex(/^ord_\d{4}$/, 'an order id like ord_1001') }),
  action: 'lookup_order',
});

export const refund = tool({
  name: 'refund',
  description:
    'Refund part of an order, in cents. Above the confirmation threshold the caller must say yes first: then call again with confirmed=true. Answers at once; the result follows.',
  parameters: z.object({
    order_id: z.string().regex(/^ord_\d{4}$/, 'an order id like ord_1001'),
    amount_cents: z.int().min(1).max(1_000_000),
    reason: z.string().max(200).optional(),
    confirmed: z.boolean().optional(),
  }),
  action: 'refund',
  intent: ['order_id', 'amount_cents'],
  goal: (args) => `refund:${String(args.order_id)}`,
  amount: (args) => Number(args.amount_cents) / 100,
});

export const concierge: AgentDefinition = {
  name: 'concierge',
  instructions:
    'You answer the phone for the restaurant group. Greet the caller, find out what they need and hand off: reservations for tables, billing for orders and refunds. Never invent the state of a booking or a refund.',
  tools: COMMON_TOOLS,
  reveals: ['book_table', 'cancel_booking'],
  handoffs: ['reservations', 'billing'],
};

export const reservations: AgentDefinition = {
  name: 'reservations',
  instructions:
    'You take table bookings. Check availability, then book with the caller’s name and party size. A booking answers "started" at once: say you are confirming it, and tell the result when it comes. If the caller changes the time, book the new time. Never say a booking went through before its result says so.',
  tools: [checkAvailability, bookTable, cancelBooking, ...COMMON_TOOLS],
  reveals: ['check_availability', 'book_table', 'cancel_booking'],
  handoffs: ['concierge', 'billing'],
};

export const billing: AgentDefinition = {
  name: 'billing',
  instructions:
    'You handle orders and refunds. Look the order up, then refund in cents. Large refunds need the caller’s explicit yes before you call refund again with confirmed=true. A refund answers "started" at once; tell the result when it comes.',
  tools: [lookupOrder, refund, ...COMMON_TOOLS],
  reveals: ['lookup_order', 'refund'],
  handoffs: ['concierge', 'reservations'],
};

export const SANDBOX_AGENTS: readonly AgentDefinition[] = [concierge, reservations, billing];
