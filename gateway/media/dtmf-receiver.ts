/**
 * Turns RFC 4733 packets into digits, one per key press. A press is one event, identified by its
 * RTP timestamp (RFC 4733 §2.5.1.1: all packets of an event share the start timestamp), and is
 * reported on its first packet seen, whichever that is. Its release is reported once, on the first
 * end packet, with the duration the sender measured (§2.5.1.3). The repeated end packets,
 * retransmitted updates, and a late copy of an old event arriving after newer ones all map to a
 * timestamp already reported and are ignored.
 *
 * A press longer than the duration field holds goes on as new segments (§2.5.1.3, §2.5.2.3): each
 * has the timestamp of the one before plus 0xFFFF, its duration starts again from zero, and only
 * the last carries the E bit. A segment of the same event at that timestamp, while the one before
 * has not ended, is the same press: no new digit, and its release reports the whole duration.
 */
import { MAX_EVENT_DURATION, parseTelephoneEvent, type DtmfDigit } from './telephone-event.ts';

/** Event timestamps remembered: more than any sender retransmits across (a few presses). */
const REMEMBERED_EVENTS = 16;

export type DtmfReceiveResult =
  /** A new press. `endedDuration` is set when its first packet seen already ends it (the rest were lost). */
  | { readonly kind: 'digit'; readonly digit: DtmfDigit; readonly endedDuration?: number }
  /** The first end packet of a press already reported; duration in RTP timestamp units, all segments included. */
  | { readonly kind: 'end'; readonly digit: DtmfDigit; readonly duration: number }
  | { readonly kind: 'repeat' }
  | { readonly kind: 'ignored'; readonly reason: 'malformed' | 'not-a-digit' };

export interface DtmfPacket {
  readonly timestamp: number;
  readonly payload: Buffer;
}

/** One segment of a press; a press shorter than the duration field holds is one segment. */
interface SeenSegment {
  readonly timestamp: number;
  readonly event: number;
  /** Duration of the press's earlier segments, in RTP timestamp units. */
  readonly before: number;
  ended: boolean;
}

export class DtmfReceiver {
  private readonly seen: SeenSegment[] = [];

  receive(packet: DtmfPacket): DtmfReceiveResult {
    const event = parseTelephoneEvent(packet.payload);
    if (!event) return { kind: 'ignored', reason: 'malformed' };
    if (!event.digit) return { kind: 'ignored', reason: 'not-a-digit' };
    const known = this.seen.find((candidate) => candidate.timestamp === packet.timestamp);
    if (known) {
      if (!event.end || known.ended) return { kind: 'repeat' };
      known.ended = true;
      return { kind: 'end', digit: event.digit, duration: known.before + event.duration };
    }
    const previousStart = (packet.timestamp - MAX_EVENT_DURATION) >>> 0;
    const previous = this.seen.find(
      (candidate) =>
        candidate.timestamp === previousStart &&
        candidate.event === event.event &&
        !candidate.ended,
    );
    const before = previous ? previous.before + MAX_EVENT_DURATION : 0;
    this.remember({ timestamp: packet.timestamp, event: event.event, before, ended: event.end });
    if (previous) {
      return event.end
        ? { kind: 'end', digit: event.digit, duration: before + event.duration }
        : { kind: 'repeat' };
    }
    return event.end
      ? { kind: 'digit', digit: event.digit, endedDuration: event.duration }
      : { kind: 'digit', digit: event.digit };
  }

  /** A new sender (SSRC change): its timestamps are unrelated to the old ones. */
  reset(): void {
    this.seen.length = 0;
  }

  private remember(segment: SeenSegment): void {
    this.seen.push(segment);
    if (this.seen.length > REMEMBERED_EVENTS) this.seen.shift();
  }
}
