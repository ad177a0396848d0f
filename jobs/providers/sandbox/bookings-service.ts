/**
 * Restaurant bookings: honours idempotency keys (the server replays first answers) and books a
 * table slot (restaurant, date, time, table) at most once. Seeded restaurants and tables are
 * fixed so tests can name them.
 */
import {
  answerError,
  answerOk,
  missingStrings,
  type SandboxService,
  type ServiceAnswer,
} from './sandbox-service.ts';

interface Restaurant {
  readonly name: string;
  /** Seats per table; table numbers are 1-based positions. */
  readonly tables: readonly number[];
}

interface Booking {
  readonly bookingId: string;
  readonly restaurant: string;
  readonly date: string;
  readonly time: string;
  readonly table: number;
  readonly partySize: number;
  readonly name: string;
  status: 'confirmed' | 'cancelled';
}

export const SANDBOX_RESTAURANTS: Readonly<Record<string, Restaurant>> = {
  'trattoria-roma': { name: 'Trattoria Roma', tables: [2, 2, 4, 4, 6] },
  'sushi-kaito': { name: 'Sushi Kaito', tables: [2, 2, 2, 4, 8] },
  'bistro-nord': { name: 'Bistro Nord', tables: [2, 4, 4, 6] },
};

/** Seatings every half hour from 12:00 to 22:00. */
const SEATINGS: readonly string[] = Array.from({ length: 21 }, (_, i) => {
  const minutes = 12 * 60 + i * 30;
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
});

const DATE = /^\d{4}-\d{2}-\d{2}$/;

export class BookingsService implements SandboxService {
  readonly name = 'bookings';
  readonly honoursIdempotencyKeys = true;
  private bookings = new Map<string, Booking>();
  /** `restaurant|date|time|table` -> booking id of the confirmed booking holding the slot. */
  private slots = new Map<string, string>();
  private nextId = 1;

  operations(): readonly string[] {
    return ['availability', 'book', 'cancel_booking'];
  }

  isMutation(operation: string): boolean {
    return operation === 'book' || operation === 'cancel_booking';
  }

  reset(): void {
    this.bookings = new Map();
    this.slots = new Map();
    this.nextId = 1;
  }

  apply(operation: string, body: Readonly<Record<string, unknown>>): ServiceAnswer {
    switch (operation) {
      case 'availability':
        return this.availability(body);
      case 'book':
        return this.book(body);
      case 'cancel_booking':
        return this.cancelBooking(body);
      default:
        return answerError(404, 'unknown_operation', `bookings has no operation ${operation}`);
    }
  }

  private availability(body: Readonly<Record<string, unknown>>): ServiceAnswer {
    const problems = missingStrings(body, ['restaurant', 'date']);
    if (body.party_size !== undefined && !isPartySize(body.party_size))
      problems.push('party_size must be an integer from 1 to 20');
    if (problems.length > 0) return answerError(400, 'invalid_request', problems.join('; '));
    const restaurantId = body.restaurant as string;
    const date = body.date as string;
    const restaurant = SANDBOX_RESTAURANTS[restaurantId];
    if (restaurant === undefined)
      return answerError(404, 'unknown_restaurant', `no restaurant ${restaurantId}`);
    if (!isDate(date)) return answerError(400, 'invalid_request', 'date must be YYYY-MM-DD');
    const partySize = typeof body.party_size === 'number' ? body.party_size : 1;
    const times = typeof body.time === 'string' ? [body.time] : SEATINGS;
    const slots = times
      .filter((time) => SEATINGS.includes(time))
      .map((time) => ({
        time,
        tables: restaurant.tables
          .map((seats, i) => ({ table: i + 1, seats }))
          .filter(
            (t) =>
              t.seats >= partySize && !this.slots.has(slotKey(restaurantId, date, time, t.table)),
          )
          .map((t) => t.table),
      }))
      .filter((slot) => slot.tables.length > 0);
    return answerOk(
      { restaurant: restaurantId, date, slots },
      `avail_${restaurantId}_${date}`,
      false,
    );
  }

  private book(body: Readonly<Record<string, unknown>>): ServiceAnswer {
    const problems = missingStrings(body, ['restaurant', 'date', 'time', 'name']);
    if (!isPartySize(body.party_size)) problems.push('party_size must be an integer from 1 to 20');
    if (
      body.table !== undefined &&
      (typeof body.table !== 'number' || !Number.isInteger(body.table))
    )
      problems.push('table must be an integer');
    if (problems.length > 0) return answerError(400, 'invalid_request', problems.join('; '));
    const restaurantId = body.restaurant as string;
    const date = body.date as string;
    const time = body.time as string;
    const partySize = body.party_size as number;
    const restaurant = SANDBOX_RESTAURANTS[restaurantId];
    if (restaurant === undefined)
      return answerError(404, 'unknown_restaurant', `no restaurant ${restaurantId}`);
    if (!isDate(date)) return answerError(400, 'invalid_request', 'date must be YYYY-MM-DD');
    if (!SEATINGS.includes(time))
      return answerError(
        422,
        'outside_opening_hours',
        `no seating at ${time} (12:00-22:00, every 30 minutes)`,
      );
    let table: number;
    if (typeof body.table === 'number') {
      table = body.table;
      const seats = restaurant.tables[table - 1];
      if (seats === undefined)
        return answerError(422, 'unknown_table', `${restaurant.name} has no table ${table}`);
      if (seats < partySize)
        return answerError(422, 'table_too_small', `table ${table} seats ${seats}`);
      if (this.slots.has(slotKey(restaurantId, date, time, table))) {
        return answerError(
          422,
          'slot_taken',
          `table ${table} at ${restaurant.name} on ${date} ${time} is already booked`,
        );
      }
    } else {
      const free = restaurant.tables.findIndex(
        (seats, i) =>
          seats >= partySize && !this.slots.has(slotKey(restaurantId, date, time, i + 1)),
      );
      if (free < 0)
        return answerError(
          422,
          'no_table_available',
          `no free table for ${partySize} at ${restaurant.name} on ${date} ${time}`,
        );
      table = free + 1;
    }
    const booking: Booking = {
      bookingId: `bk_${String(this.nextId++).padStart(6, '0')}`,
      restaurant: restaurantId,
      date,
      time,
      table,
      partySize,
      name: body.name as string,
      status: 'confirmed',
    };
    this.bookings.set(booking.bookingId, booking);
    this.slots.set(slotKey(restaurantId, date, time, table), booking.bookingId);
    return answerOk(describe(booking), booking.bookingId, true, 201);
  }

  private cancelBooking(body: Readonly<Record<string, unknown>>): ServiceAnswer {
    const problems = missingStrings(body, ['booking_id']);
    if (problems.length > 0) return answerError(400, 'invalid_request', problems.join('; '));
    const booking = this.bookings.get(body.booking_id as string);
    if (booking === undefined)
      return answerError(404, 'booking_not_found', `no booking ${String(body.booking_id)}`);
    // Undoing an undone booking is not a second effect: compensation must be safe to repeat.
    if (booking.status === 'cancelled')
      return answerOk({ ...describe(booking), already_cancelled: true }, booking.bookingId, false);
    booking.status = 'cancelled';
    this.slots.delete(slotKey(booking.restaurant, booking.date, booking.time, booking.table));
    return answerOk(describe(booking), booking.bookingId, true);
  }
}

function describe(booking: Booking): Record<string, unknown> {
  return {
    booking_id: booking.bookingId,
    restaurant: booking.restaurant,
    date: booking.date,
    time: booking.time,
    table: booking.table,
    party_size: booking.partySize,
    name: booking.name,
    status: booking.status,
  };
}

function slotKey(restaurant: string, date: string, time: string, table: number): string {
  return `${restaurant}|${date}|${time}|${table}`;
}

function isPartySize(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 20;
}

function isDate(value: string): boolean {
  return (
    DATE.test(value) &&
    !Number.isNaN(Date.parse(`${value}T00:00:00Z`)) &&
    new Date(`${value}T00:00:00Z`).toISOString().startsWith(value)
  );
}
