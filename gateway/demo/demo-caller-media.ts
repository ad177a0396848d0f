/**
 * The demo's phone, media half: one RTP socket sending 20 ms PCMU frames (silence, or speech the
 * caller says, or RFC 4733 key presses) to the address in callgate's SDP answer, and recording
 * what comes back, so the demo can tell when the agent talks and when it has gone quiet.
 */
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { decodeUlaw, ULAW_SILENCE } from '../media/g711.ts';
import { parseRtpPacket, serializeRtpPacket } from '../media/rtp-packet.ts';
import { serializeTelephoneEvent, type DtmfDigit } from '../media/telephone-event.ts';
import { parseSdp } from '../sip/sdp-parser.ts';

const FRAME_MS = 20;
const SAMPLES_PER_FRAME = 160;
const PCMU = 0;
/** The telephone-event payload type the demo offers. */
export const TELEPHONE_EVENT_PT = 101;
/** Frames a key is held (RFC 4733 sends an update per frame), then the end packet three times. */
const DIGIT_FRAMES = 5;
const END_PACKETS = 3;
/**
 * A frame counts as the agent talking when its mean absolute sample is above this (about -45 dBFS):
 * far above μ-law idle noise, far below speech.
 */
const AUDIBLE_MEAN_ABS = 180;

export interface HeardSpan {
  readonly from: number;
  readonly to: number;
}

export class DemoCallerMedia {
  private readonly socket: Socket;
  private remote: { address: string; port: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private framesSent = 0;
  private sequence = randomBytes(2).readUInt16BE(0);
  private timestamp = randomBytes(4).readUInt32BE(0);
  private readonly ssrc = randomBytes(4).readUInt32BE(0);
  private speech: { frames: Buffer[]; done: () => void } | undefined;
  private readonly digits: { digit: DtmfDigit; frame: number; start: number; done: () => void }[] =
    [];
  /** Times (ms since epoch) of every audible frame callgate sent. */
  readonly audibleAt: number[] = [];
  packetsReceived = 0;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('message', (data) => this.receive(data));
  }

  static async open(host: string): Promise<DemoCallerMedia> {
    const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, host, () => resolve());
    });
    return new DemoCallerMedia(socket);
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** The SDP offer of the demo's phone: PCMU and telephone-event, at this socket. */
  offer(host: string): string {
    const ip = host.includes(':') ? 'IP6' : 'IP4';
    return [
      'v=0',
      `o=callgate-demo ${Date.now()} 1 IN ${ip} ${host}`,
      's=callgate demo',
      `c=IN ${ip} ${host}`,
      't=0 0',
      `m=audio ${this.port} RTP/AVP ${PCMU} ${TELEPHONE_EVENT_PT}`,
      'a=rtpmap:0 PCMU/8000',
      `a=rtpmap:${TELEPHONE_EVENT_PT} telephone-event/8000`,
      `a=fmtp:${TELEPHONE_EVENT_PT} 0-15`,
      'a=ptime:20',
      'a=sendrecv',
      '',
    ].join('\r\n');
  }

  /** Starts sending to the address of callgate's SDP answer. */
  start(sdpAnswer: string): void {
    const parsed = parseSdp(sdpAnswer);
    if (!parsed.ok) throw new Error(`callgate's SDP answer could not be read: ${parsed.reason}`);
    const audio = parsed.value.media.find((m) => m.type === 'audio');
    const address = audio?.connection?.address ?? parsed.value.connection?.address;
    if (audio === undefined || address === undefined || audio.port === 0)
      throw new Error('callgate answered without an audio stream');
    this.remote = { address, port: audio.port };
    this.startedAt = performance.now();
    this.timer = setInterval(() => this.pace(), FRAME_MS / 2);
  }

  /** Says `audio` (8 kHz μ-law) in place of silence; resolves when its last frame went out. */
  say(audio: Buffer): Promise<void> {
    return new Promise((resolve) => {
      const frames: Buffer[] = [];
      for (let at = 0; at < audio.length; at += SAMPLES_PER_FRAME) {
        const frame = Buffer.alloc(SAMPLES_PER_FRAME, ULAW_SILENCE);
        audio.copy(frame, 0, at, Math.min(audio.length, at + SAMPLES_PER_FRAME));
        frames.push(frame);
      }
      this.speech = { frames, done: resolve };
    });
  }

  /** Presses a key (RFC 4733); resolves when its end packets went out. */
  press(digit: DtmfDigit): Promise<void> {
    return new Promise((resolve) => this.digits.push({ digit, frame: 0, start: 0, done: resolve }));
  }

  /** When the agent was last heard (0: never). */
  get lastAudibleAt(): number {
    return this.audibleAt[this.audibleAt.length - 1] ?? 0;
  }

  /** Milliseconds of the agent's audio heard since `at`. */
  heardMsSince(at: number): number {
    let count = 0;
    for (let i = this.audibleAt.length - 1; i >= 0 && (this.audibleAt[i] ?? 0) >= at; i--) count++;
    return count * FRAME_MS;
  }

  /** Stretches of the agent's audio, split where it paused longer than `gapMs`. */
  spans(gapMs = 400): HeardSpan[] {
    const spans: { from: number; to: number }[] = [];
    for (const at of this.audibleAt) {
      const last = spans[spans.length - 1];
      if (last !== undefined && at - last.to <= gapMs) last.to = at;
      else spans.push({ from: at, to: at });
    }
    return spans.map((s) => ({ from: s.from - FRAME_MS, to: s.to }));
  }

  /** Stops sending (the call is over); what arrives is still recorded until close(). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.speech?.done();
    this.speech = undefined;
    for (const digit of this.digits.splice(0)) digit.done();
  }

  close(): void {
    this.stop();
    this.socket.close();
  }

  /** Sends every frame that is due by the wall clock: even a late timer keeps 20 ms pacing on average. */
  private pace(): void {
    const due = Math.floor((performance.now() - this.startedAt) / FRAME_MS);
    while (this.framesSent <= due) {
      this.sendFrame();
      this.framesSent++;
    }
  }

  private sendFrame(): void {
    const digit = this.digits[0];
    if (digit !== undefined) {
      if (digit.frame === 0) digit.start = this.timestamp;
      const end = digit.frame >= DIGIT_FRAMES;
      const payload = serializeTelephoneEvent({
        digit: digit.digit,
        end,
        volume: 10,
        duration: Math.min(digit.frame + 1, DIGIT_FRAMES) * SAMPLES_PER_FRAME,
      });
      this.send(TELEPHONE_EVENT_PT, digit.start, payload, digit.frame === 0);
      digit.frame++;
      if (digit.frame >= DIGIT_FRAMES + END_PACKETS) {
        this.digits.shift();
        digit.done();
      }
    } else if (this.speech !== undefined) {
      const frame = this.speech.frames.shift();
      if (frame !== undefined) this.send(PCMU, this.timestamp, frame, false);
      if (this.speech.frames.length === 0) {
        this.speech.done();
        this.speech = undefined;
      }
    } else {
      this.send(PCMU, this.timestamp, Buffer.alloc(SAMPLES_PER_FRAME, ULAW_SILENCE), false);
    }
    this.timestamp = (this.timestamp + SAMPLES_PER_FRAME) >>> 0;
  }

  private send(payloadType: number, timestamp: number, payload: Buffer, marker: boolean): void {
    const remote = this.remote;
    if (remote === undefined) return;
    const packet = serializeRtpPacket({
      payloadType,
      sequenceNumber: this.sequence,
      timestamp,
      ssrc: this.ssrc,
      marker,
      payload,
    });
    this.sequence = (this.sequence + 1) & 0xffff;
    this.socket.send(packet, remote.port, remote.address);
  }

  private receive(data: Buffer): void {
    const parsed = parseRtpPacket(data);
    if (!parsed.ok || parsed.packet.payloadType !== PCMU) return;
    this.packetsReceived++;
    const samples = decodeUlaw(parsed.packet.payload);
    let sum = 0;
    for (const sample of samples) sum += Math.abs(sample);
    if (samples.length > 0 && sum / samples.length > AUDIBLE_MEAN_ABS)
      this.audibleAt.push(Date.now());
  }
}
