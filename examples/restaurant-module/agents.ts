/**
 * An agent and a plugin of a restaurant group's own, in TypeScript: private dining rooms, booked
 * through the same `book_table` action as a table (callgate.yaml in this folder names this module
 * as `agents.module`). What the configuration's data could not say is code here: the goal falls
 * back to the session when the caller's number is withheld, and the rooms' closing day is a check
 * on the date.
 */
import { z } from 'zod';
import { defineAgent, plugin, tool } from 'callgate';

const RESTAURANTS = ['trattoria-roma', 'sushi-kaito', 'bistro-nord'] as const;

/** The private rooms close on Mondays (getUTCDay: Sunday is 0). */
const CLOSED_DAY = 1;

const bookPrivateRoom = tool({
  name: 'book_private_room',
  description:
    'Book the private dining room of a restaurant for a group. Answers at once with an operation id; the confirmation follows. Booking another restaurant for the same evening replaces the first booking.',
  parameters: z.object({
    restaurant: z.enum(RESTAURANTS),
    date: z.iso.date(),
    time: z.string().regex(/^(1[89]|2[0-1]):[0-5]\d$/, 'between 18:00 and 21:59'),
    party_size: z.int().min(8).max(20),
    name: z.string().min(1).max(80),
  }),
  action: 'book_table',
  intent: ['restaurant', 'date', 'time', 'party_size'],
  // One private dinner per caller and evening, at whichever restaurant.
  goal: (args, call) => `private-dining:${call.caller ?? call.session}:${args.date}`,
  compensation: {
    action: 'cancel_booking',
    args: (result) => ({ booking_id: result.booking_id }),
  },
});

const cancelBooking = tool({
  name: 'cancel_booking',
  description: 'Cancel a confirmed booking by its booking id.',
  parameters: z.object({ booking_id: z.string().min(1).max(64) }),
  action: 'cancel_booking',
  intent: ['booking_id'],
});

export const agents = [
  defineAgent({
    name: 'private-dining',
    instructions:
      'You book the private dining rooms of the restaurant group, for groups of 8 to 20. Ask for the restaurant, the evening, the time, the size of the group and a name, then book. A booking answers "started" at once: say you are confirming it, and tell the result when it comes. Never say a booking went through before its result says so.',
    greeting: 'Private dining, good evening. Which restaurant would you like?',
    tools: [
      bookPrivateRoom,
      cancelBooking,
      tool({ name: 'operation_status', control: 'operation_status' }),
      tool({ name: 'transfer_to_human', control: 'transfer_to_human' }),
    ],
    reveals: ['book_table', 'cancel_booking'],
  }),
];

export const plugins = [
  plugin({
    name: 'private-rooms-closed-day',
    before: ({ tool: called, args }) => {
      if (called.name !== bookPrivateRoom.name || typeof args.date !== 'string')
        return { type: 'allow' };
      return new Date(`${args.date}T00:00:00Z`).getUTCDay() === CLOSED_DAY
        ? {
            type: 'refuse',
            reason: 'The private rooms are closed on Mondays; offer another evening.',
          }
        : { type: 'allow' };
    },
  }),
];
