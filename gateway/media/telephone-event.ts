/**
 * RFC 4733 telephone-event payloads (DTMF digits), pure: event(8) | E(1) R(1) volume(6) |
 * duration(16). Only the 16 DTMF events are named; others (flash, tones) parse as `null` digits.
 */

export type DtmfDigit =
  '0' | '1' | '2' | '3' | '4' | '5' | '6' | '7' | '8' | '9' | '*' | '#' | 'A' | 'B' | 'C' | 'D';

const DIGITS: readonly DtmfDigit[] = [
  '0',
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '*',
  '#',
  'A',
  'B',
  'C',
  'D',
];

export const TELEPHONE_EVENT_BYTES = 4;

/**
 * The most the 16-bit duration field holds, in RTP timestamp units (1.37 s at 48 kHz, 8.2 s at
 * 8 kHz). A longer event goes on as a new segment whose timestamp is this much later (§2.5.1.3).
 */
export const MAX_EVENT_DURATION = 0xffff;

export interface TelephoneEvent {
  readonly event: number;
  readonly digit: DtmfDigit | null;
  readonly end: boolean;
  /** Power level in -dBm0 (0-63). */
  readonly volume: number;
  /** Duration so far, in RTP timestamp units. */
  readonly duration: number;
}

/** Reads the first event of a payload; null when it is too short to hold one. */
export function parseTelephoneEvent(payload: Buffer): TelephoneEvent | null {
  if (payload.length < TELEPHONE_EVENT_BYTES) return null;
  const event = payload[0] as number;
  const flags = payload[1] as number;
  return {
    event,
    digit: DIGITS[event] ?? null,
    end: (flags & 0x80) !== 0,
    volume: flags & 0x3f,
    duration: payload.readUInt16BE(2),
  };
}

/**
 * Throws a RangeError for a duration the field cannot hold: clamping it would send a wrong
 * duration, and a longer event must be split into segments by the caller (§2.5.1.3).
 */
export function serializeTelephoneEvent(event: {
  digit: DtmfDigit;
  end: boolean;
  volume: number;
  duration: number;
}): Buffer {
  const duration = Math.round(event.duration);
  if (!(duration >= 0 && duration <= MAX_EVENT_DURATION)) {
    throw new RangeError(
      `telephone-event duration ${event.duration} is outside 0-${MAX_EVENT_DURATION}; send a longer event as segments`,
    );
  }
  const out = Buffer.alloc(TELEPHONE_EVENT_BYTES);
  out[0] = DIGITS.indexOf(event.digit);
  out[1] = (event.end ? 0x80 : 0) | (event.volume & 0x3f);
  out.writeUInt16BE(duration, 2);
  return out;
}

export function isDtmfDigit(value: string): value is DtmfDigit {
  return (DIGITS as readonly string[]).includes(value);
}
