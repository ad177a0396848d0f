/**
 * Sends digits as RFC 4733 events, one packet per 20 ms frame in place of audio: the first with
 * the marker bit, updates with a growing duration, then the end packet three times (§2.5.1.4:
 * the end is repeated so one lost packet does not lose the key release). Pure: the session asks
 * for the packet of each frame and supplies the frame's RTP timestamp.
 */
import { FRAME_MS } from './audio-format.ts';
import { serializeTelephoneEvent, type DtmfDigit } from './telephone-event.ts';

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
  /** The event's start timestamp, shared by all its packets. */
  readonly timestamp: number;
}

interface Pending {
  readonly digit: DtmfDigit;
  readonly frames: number;
}

export class DtmfSender {
  private readonly samplesPerFrame: number;
  private readonly queue: Pending[] = [];
  private current: { digit: DtmfDigit; frames: number; sent: number; timestamp: number; endsSent: number } | undefined;
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

  /** The packet for the frame whose RTP timestamp is `frameTimestamp`, or null (send audio). */
  next(frameTimestamp: number): DtmfOutPacket | null {
    if (!this.current) {
      if (this.gap > 0) {
        this.gap--;
        return null;
      }
      const pending = this.queue.shift();
      if (!pending) return null;
      this.current = { digit: pending.digit, frames: pending.frames, sent: 0, timestamp: frameTimestamp >>> 0, endsSent: 0 };
    }
    const event = this.current;
    if (event.sent < event.frames) {
      event.sent++;
      const end = event.sent === event.frames;
      if (end) event.endsSent++;
      return this.packet(event, end, event.sent === 1);
    }
    event.endsSent++;
    const packet = this.packet(event, true, false);
    if (event.endsSent >= END_REPEATS) {
      this.current = undefined;
      this.gap = INTER_DIGIT_GAP_FRAMES;
    }
    return packet;
  }

  private packet(event: { digit: DtmfDigit; sent: number; timestamp: number; frames: number }, end: boolean, marker: boolean): DtmfOutPacket {
    const duration = Math.min(event.sent, event.frames) * this.samplesPerFrame;
    return { payload: serializeTelephoneEvent({ digit: event.digit, end, volume: DTMF_VOLUME, duration }), marker, timestamp: event.timestamp };
  }
}
