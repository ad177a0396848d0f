/**
 * Turns RFC 4733 packets into digits, one per key press. A press is one event, identified by its
 * RTP timestamp (RFC 4733 §2.5.1.1: all packets of an event share the start timestamp), and is
 * reported on its first packet seen, whichever that is. The repeated end packets, retransmitted
 * updates, and a late copy of an old event arriving after newer ones all map to a timestamp
 * already reported and are ignored.
 */
import { parseTelephoneEvent, type DtmfDigit } from './telephone-event.ts';

/** Event timestamps remembered: more than any sender retransmits across (a few presses). */
const REMEMBERED_EVENTS = 16;

export type DtmfReceiveResult =
  | { readonly kind: 'digit'; readonly digit: DtmfDigit }
  | { readonly kind: 'repeat' }
  | { readonly kind: 'ignored'; readonly reason: 'malformed' | 'not-a-digit' };

export interface DtmfPacket {
  readonly timestamp: number;
  readonly payload: Buffer;
}

export class DtmfReceiver {
  private readonly seen: number[] = [];

  receive(packet: DtmfPacket): DtmfReceiveResult {
    const event = parseTelephoneEvent(packet.payload);
    if (!event) return { kind: 'ignored', reason: 'malformed' };
    if (!event.digit) return { kind: 'ignored', reason: 'not-a-digit' };
    if (this.seen.includes(packet.timestamp)) return { kind: 'repeat' };
    this.seen.push(packet.timestamp);
    if (this.seen.length > REMEMBERED_EVENTS) this.seen.shift();
    return { kind: 'digit', digit: event.digit };
  }

  /** A new sender (SSRC change): its timestamps are unrelated to the old ones. */
  reset(): void {
    this.seen.length = 0;
  }
}
