/**
 * RFC 4733 telephone-event payloads (DTMF digits), pure: event(8) | E(1) R(1) volume(6) |
 * duration(16). Only the 16 DTMF events are named; others (flash, tones) parse as `null` digits.
 */

export type DtmfDigit = '0' | '1' | '2' | '3' | '4' | '5' | '6' | '7' | '8' | '9' | '*' | '#' | 'A' | 'B' | 'C' | 'D';

const DIGITS: readonly DtmfDigit[] = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#', 'A', 'B', 'C', 'D'];

export const TELEPHONE_EVENT_BYTES = 4;

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

export function serializeTelephoneEvent(event: { digit: DtmfDigit; end: boolean; volume: number; duration: number }): Buffer {
  const out = Buffer.alloc(TELEPHONE_EVENT_BYTES);
  out[0] = DIGITS.indexOf(event.digit);
  out[1] = (event.end ? 0x80 : 0) | (event.volume & 0x3f);
  out.writeUInt16BE(Math.min(0xffff, Math.max(0, Math.round(event.duration))), 2);
  return out;
}

export function isDtmfDigit(value: string): value is DtmfDigit {
  return (DIGITS as readonly string[]).includes(value);
}
