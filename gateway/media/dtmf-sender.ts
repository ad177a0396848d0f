/**
 * Sends digits as RFC 4733 events, one packet per 20 ms frame in place of audio: the first with
 * the marker bit, updates with a growing duration, then the end packet three times (§2.5.1.4:
 * the end is repeated so one lost packet does not lose the key release). Pure: the session asks
 * for the packet of each frame and supplies the frame's RTP timestamp.
 *
 * A digit longer than the duration field holds (0xFFFF units: 1.37 s at 48 kHz) is sent as
 * segments (§2.5.1.3): in the frame where a segment passes 0xFFFF it reports exactly 0xFFFF
 * without the E bit, and from the next frame on a new segment goes out, its timestamp 0xFFFF
 * later and its duration counted from there. Only the last segment ends. Continuation segments
 * carry no marker: they are the same press, not a new event.
 */
import { FRAME_MS } from './audio-format.ts';
import { MAX_EVENT_DURATION, serializeTelephoneEvent, type DtmfDigit } from './telephone-event.ts';

/** Carriers and IVRs detect 40 ms reliably; 100 ms is the common default tone length. */
export const DEFAULT_DTMF_DURATION_MS = 100;
/** -10 dBm0: the level RFC 4733 examples and most gateways use. */
const DTMF_VOLUME = 10;
/** The end packet goes out this many times (RFC 4733 §2.5.1.4), so one loss does not hide the release. */
const END_REPEATS = 3;
/** Frames without events between two digits, so the receiver hears two presses. */
const INTER_DIGIT_GAP_FRAMES = 2;

export interface DtmfSenderOptions {
  /** RTP clock rate of the call's audio; telephone-event uses the same clock. */
  readonly clockRate: number;
}

export interface DtmfOutPacket {
  readonly payload: Buffer;
  readonly marker: boolean;
  /** The segment's start timestamp, shared by all its packets (the event's, unless it is longer than 0xFFFF units). */
  readonly timestamp: number;
}

interface Pending {
  readonly digit: DtmfDigit;
  readonly frames: number;
}

interface SendingEvent {
  readonly digit: DtmfDigit;
  readonly frames: number;
  /** Frames of the digit sent so far. */
  sent: number;
  /** RTP timestamp of the event's first segment. */
  readonly timestamp: number;
  /** Where the current segment starts, in timestamp units after `timestamp`: a multiple of 0xFFFF. */
  segmentOffset: number;
  endsSent: number;
}

export class DtmfSender {
  private readonly samplesPerFrame: number;
  private readonly queue: Pending[] = [];
  private current: SendingEvent | undefined;
  private gap = 0;

  constructor(options: DtmfSenderOptions) {
    this.samplesPerFrame = (options.clockRate * FRAME_MS) / 1000;
  }

  enqueue(digit: DtmfDigit, durationMs: number = DEFAULT_DTMF_DURATION_MS): void {
    this.queue.push({ digit, frames: Math.max(2, Math.round(durationMs / FRAME_MS)) });
  }

  get pending(): number {
    return this.queue.length + (this.current ? 1 : 0);
  }

  /**
   * A sender for a stream on another clock (a new SSRC after a codec change), with the digits
   * still queued here. The digit being sent stays behind: the far end heard it start, and a
   * release under the old SSRC can no longer be sent, so RFC 4733 receivers end it by timeout.
   */
  withClockRate(clockRate: number): DtmfSender {
    const sender = new DtmfSender({ clockRate });
    sender.queue.push(...this.queue);
    return sender;
  }

  /** The packet for the frame whose RTP timestamp is `frameTimestamp`, or null (send audio). */
  next(frameTimestamp: number): DtmfOutPacket | null {
    if (!this.current) {
      if (this.gap > 0) {
        this.gap--;
        return null;
      }
      const pending = this.queue.shift();
      if (!pending) return null;
      this.current = {
        digit: pending.digit,
        frames: pending.frames,
        sent: 0,
        timestamp: frameTimestamp >>> 0,
        segmentOffset: 0,
        endsSent: 0,
      };
    }
    const event = this.current;
    if (event.sent < event.frames) {
      event.sent++;
      const marker = event.sent === 1;
      if (this.elapsed(event) - event.segmentOffset > MAX_EVENT_DURATION) {
        // The segment reached its maximum during this frame: say so, and go on in a new one. When
        // this was the digit's last frame, the end packets that follow belong to the new segment.
        const full = this.packet(event, MAX_EVENT_DURATION, false, marker);
        event.segmentOffset += MAX_EVENT_DURATION;
        return full;
      }
      const end = event.sent === event.frames;
      if (end) event.endsSent++;
      return this.packet(event, this.elapsed(event) - event.segmentOffset, end, marker);
    }
    event.endsSent++;
    const packet = this.packet(event, this.elapsed(event) - event.segmentOffset, true, false);
    if (event.endsSent >= END_REPEATS) {
      this.current = undefined;
      this.gap = INTER_DIGIT_GAP_FRAMES;
    }
    return packet;
  }

  /** Timestamp units from the event's start to the end of its last frame sent. */
  private elapsed(event: SendingEvent): number {
    return event.sent * this.samplesPerFrame;
  }

  private packet(
    event: SendingEvent,
    duration: number,
    end: boolean,
    marker: boolean,
  ): DtmfOutPacket {
    return {
      payload: serializeTelephoneEvent({ digit: event.digit, end, volume: DTMF_VOLUME, duration }),
      marker,
      timestamp: (event.timestamp + event.segmentOffset) >>> 0,
    };
  }
}
