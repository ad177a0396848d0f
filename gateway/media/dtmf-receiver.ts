/**
 * Turns RFC 4733 packets into digits, one per key press. A press is one event, identified by its
 * RTP timestamp (RFC 4733 §2.5.1.1: all packets of an event share the start timestamp), and is
 * reported on its first packet seen, whichever that is. Its release is reported once, on the first
 * end packet, with the duration the sender measured (§2.5.1.3). The repeated end packets,
 * retransmitted updates, and a late copy of an old event arriving after newer ones all map to a
 * timestamp already reported and are ignored.
 */
import { parseTelephoneEvent, type DtmfDigit } from './telephone-event.ts';

/** Event timestamps remembered: more than any sender retransmits across (a few presses). */
const REMEMBERED_EVENTS = 16;

export type DtmfReceiveResult =
  /** A new press. `endedDuration` is set when its first packet seen already ends it (the rest were lost). */
  | { readonly kind: 'digit'; readonly digit: DtmfDigit; readonly endedDuration?: number }
  /** The first end packet of a press already reported; duration in RTP timestamp units. */
  | { readonly kind: 'end'; readonly digit: DtmfDigit; readonly duration: number }
  | { readonly kind: 'repeat' }
  | { readonly kind: 'ignored'; readonly reason: 'malformed' | 'not-a-digit' };

export interface DtmfPacket {
  readonly timestamp: number;
  readonly payload: Buffer;
}

interface SeenEvent {
  readonly timestamp: number;
  ended: boolean;
}

export class DtmfReceiver {
  private readonly seen: SeenEvent[] = [];

  receive(packet: DtmfPacket): DtmfReceiveResult {
    const event = parseTelephoneEvent(packet.payload);
    if (!event) return { kind: 'ignored', reason: 'malformed' };
    if (!event.digit) return { kind: 'ignored', reason: 'not-a-digit' };
    const known = this.seen.find((candidate) => candidate.timestamp === packet.timestamp);
    if (known) {
      if (!event.end || known.ended) return { kind: 'repeat' };
      known.ended = true;
      return { kind: 'end', digit: event.digit, duration: event.duration };
    }
    this.seen.push({ timestamp: packet.timestamp, ended: event.end });
    if (this.seen.length > REMEMBERED_EVENTS) this.seen.shift();
    return event.end ? { kind: 'digit', digit: event.digit, endedDuration: event.duration } : { kind: 'digit', digit: event.digit };
  }

  /** A new sender (SSRC change): its timestamps are unrelated to the old ones. */
  reset(): void {
    this.seen.length = 0;
  }
}
