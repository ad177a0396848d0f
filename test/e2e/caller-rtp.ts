/**
 * The caller's side of RTP for e2e calls whose signaling sipp does: a loopback UDP socket that
 * sends 20 ms PCMU silence (from the first packet callgate sends, symmetric RTP), presses keys as
 * RFC 4733 telephone-events, and records every packet callgate sends back.
 */
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { encodeUlaw } from '../../gateway/media/g711.ts';
import { parseRtpPacket } from '../../gateway/media/rtp-packet.ts';
import { serializeTelephoneEvent, type DtmfDigit } from '../../gateway/media/telephone-event.ts';

const FRAME_MS = 20;
const SAMPLES_PER_FRAME = 160;
const PCMU_SILENCE = Buffer.alloc(SAMPLES_PER_FRAME, 0xff);
/** Frames a key is held (RFC 4733 updates every frame), then three end packets. */
const DIGIT_FRAMES = 5;
const END_PACKETS = 3;
/**
 * 20 ms of a loud two-tone signal (about -14 dBFS): well above the simulator's energy VAD
 * threshold (-35 dBFS), so it counts as the caller speaking.
 */
const PCMU_VOICE = (() => {
  const samples = new Int16Array(SAMPLES_PER_FRAME);
  for (let i = 0; i < samples.length; i++)
    samples[i] = Math.round(
      3000 * Math.sin((2 * Math.PI * 440 * i) / 8000) +
        3000 * Math.sin((2 * Math.PI * 700 * i) / 8000),
    );
  return encodeUlaw(samples);
})();

export interface ReceivedRtp {
  readonly at: number;
  readonly payloadType: number;
  readonly ssrc: number;
  readonly bytes: number;
  /** True when the payload is not μ-law silence (0xFF/0x7F): callgate said something. */
  readonly audible: boolean;
}

export class CallerRtp {
  readonly received: ReceivedRtp[] = [];
  private readonly socket: Socket;
  private remote: { address: string; port: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private sequence = randomBytes(2).readUInt16BE(0);
  private timestamp = randomBytes(4).readUInt32BE(0);
  private readonly ssrc = randomBytes(4).readUInt32BE(0);
  private readonly digits: { digit: DtmfDigit; frame: number; start: number; marker: boolean }[] =
    [];
  readonly sentDigits: DtmfDigit[] = [];
  /** Frames of voice still to send in place of silence. */
  private voiceFrames = 0;
  private muted = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('message', (data, from) => {
      const parsed = parseRtpPacket(data);
      if (!parsed.ok) return;
      const payload = parsed.packet.payload;
      this.received.push({
        at: Date.now(),
        payloadType: parsed.packet.payloadType,
        ssrc: parsed.packet.ssrc,
        bytes: payload.length,
        audible: payload.some((b) => b !== 0xff && b !== 0x7f),
      });
      if (this.remote === undefined) {
        this.remote = { address: from.address, port: from.port };
        if (!this.muted) this.timer = setInterval(() => this.sendFrame(), FRAME_MS);
      }
    });
  }

  static async open(): Promise<CallerRtp> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new CallerRtp(socket);
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** Where callgate's RTP came from (its RTP port), once it has sent something. */
  get source(): { address: string; port: number } | undefined {
    return this.remote;
  }

  /** Presses a key: RFC 4733 events in place of audio for DIGIT_FRAMES frames, then the end packets. */
  press(digit: DtmfDigit): void {
    this.digits.push({ digit, frame: 0, start: this.timestamp, marker: true });
    this.sentDigits.push(digit);
  }

  /** Stops sending RTP (a phone that went away without hanging up); still records what arrives. */
  mute(): void {
    clearInterval(this.timer);
    this.muted = true;
  }

  /** Talks (a loud tone) for `ms`, in place of silence. */
  speak(ms: number): void {
    this.voiceFrames = Math.ceil(ms / FRAME_MS);
  }

  audibleSince(at: number, until = Infinity): number {
    return this.received.filter((p) => p.at >= at && p.at < until && p.audible).length;
  }

  /** Stops sending and closes the socket; closing again does nothing. */
  close(): void {
    clearInterval(this.timer);
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
  }

  private sendFrame(): void {
    const remote = this.remote;
    if (remote === undefined) return;
    const digit = this.digits[0];
    if (digit !== undefined) {
      const end = digit.frame >= DIGIT_FRAMES;
      const payload = serializeTelephoneEvent({
        digit: digit.digit,
        end,
        volume: 10,
        duration: Math.min(digit.frame + 1, DIGIT_FRAMES) * SAMPLES_PER_FRAME,
      });
      this.send(101, digit.start, payload, digit.marker);
      digit.marker = false;
      digit.frame++;
      if (digit.frame >= DIGIT_FRAMES + END_PACKETS) this.digits.shift();
    } else if (this.voiceFrames > 0) {
      this.voiceFrames--;
      this.send(0, this.timestamp, PCMU_VOICE, false);
    } else {
      this.send(0, this.timestamp, PCMU_SILENCE, false);
    }
    this.timestamp = (this.timestamp + SAMPLES_PER_FRAME) >>> 0;
  }

  private send(payloadType: number, timestamp: number, payload: Buffer, marker: boolean): void {
    const header = Buffer.alloc(12);
    header[0] = 0x80;
    header[1] = (marker ? 0x80 : 0) | payloadType;
    header.writeUInt16BE(this.sequence, 2);
    header.writeUInt32BE(timestamp >>> 0, 4);
    header.writeUInt32BE(this.ssrc, 8);
    this.sequence = (this.sequence + 1) & 0xffff;
    const remote = this.remote;
    if (remote !== undefined)
      this.socket.send(Buffer.concat([header, payload]), remote.port, remote.address);
  }
}
