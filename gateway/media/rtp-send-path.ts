/**
 * The send path of an RtpSession: model items encoded to the wire codec and paced out one frame
 * per due slot, RFC 4733 digits ahead of audio, RTP headers written into reused buffers, and the
 * outbox a tick fills and flush() hands to the socket (where lateness is measured).
 *
 *   play(itemId, audio) -> SendTranscoder -> Playout --sendFrame(index)--> outbox --flush()--> socket
 */
import { randomBytes } from 'node:crypto';
import type { RtpConfig } from '../../config/schema.ts';
import {
  FRAME_MS,
  samplesPerFrame,
  transcodingRate,
  type ModelAudioFormat,
  type WireCodec,
} from './audio-format.ts';
import { DtmfSender } from './dtmf-sender.ts';
import * as metrics from './media-metrics.ts';
import {
  Playout,
  type PlayoutClearResult,
  type PlayoutPosition,
  type PlayoutStats,
} from './playout.ts';
import { ReceiveTranscoder } from './receive-transcoder.ts';
import { RTP_HEADER_BYTES, RTP_VERSION } from './rtp-packet.ts';
import type { RtpSessionContext } from './rtp-session-context.ts';
import { rtpEvents, type RtpEndpoint } from './rtp-session-events.ts';
import { SendTranscoder } from './send-transcoder.ts';
import type { DtmfDigit } from './telephone-event.ts';

/**
 * Model audio queued for playout at most: a model streams faster than real time, but a reply
 * longer than five minutes is not one a caller waits through, and a server that streams without
 * end must not grow a call's memory without bound (five minutes of PCMU is 2.4 MB).
 */
export const MAX_QUEUED_MS = 300_000;
/** Per-call lateness histogram: 0.5 ms bins up to 100 ms (the last bin holds everything above). */
export const LATENESS_BIN_MS = 0.5;
const LATENESS_BINS = 201;
/**
 * Items cleared by barge-in that are remembered, so late audio deltas of a cancelled model
 * response are not played; a model sends at most a few responses' worth after a cancel.
 */
const REMEMBERED_CLEARED_ITEMS = 16;
/** Finished and cleared items whose sent milliseconds stay readable with `playedMs()`. */
const REMEMBERED_PLAYED_ITEMS = 16;

/** Where packets go: the session's sockets. */
export interface RtpPacketSink {
  /** A buffer of `length` bytes to build a packet to `to` in (one the socket no longer holds). */
  rtpPacketBuffer(length: number, to: RtpEndpoint): Buffer;
  sendRtp(packet: Buffer, to: RtpEndpoint): void;
}

export interface RtpSendPathOptions {
  readonly context: RtpSessionContext;
  readonly config: RtpConfig;
  readonly codec: WireCodec;
  readonly model: ModelAudioFormat;
  readonly sink: RtpPacketSink;
}

export class RtpSendPath {
  private readonly context: RtpSessionContext;
  private readonly config: RtpConfig;
  private readonly sink: RtpPacketSink;
  private sendTranscoder: SendTranscoder;
  private readonly playout: Playout;
  private dtmfSender: DtmfSender;
  private frameSamples: number;
  /** 20 ms of silence in the wire codec, encoded once. */
  private silence: Buffer;
  private sendSsrc: number;
  /** RTP timestamp of frame `timestampIndex`; later frames add frameSamples per index. */
  private timestampBase: number;
  private timestampIndex = 0;
  private sequence: number;
  /** The next audio packet starts a talk spurt whatever the playout says (after a codec change). */
  private forceMarker = false;
  /** Recently cleared items: audio that still arrives for them is dropped, not played. */
  private readonly clearedItems: string[] = [];
  /** Sent milliseconds of recently finished or cleared items, oldest first. */
  private readonly playedItems: Array<{ readonly itemId: string; readonly sentMs: number }> = [];
  /** Item whose audio is being encoded now: the send transcoder's remainder belongs to it. */
  private encodingItem: string | undefined;
  private sending = true;
  private closed = false;
  private sentSinceReportFlag = false;
  /** The RTP timestamp of the last frame sent (audio or digit) and when it was due: the media clock. */
  private lastSentTimestamp = 0;
  private lastSentDueMs = 0;
  private readonly latenessBins = new Uint32Array(LATENESS_BINS);
  /** Packets sendFrame() prepared and flush() sends, with the time each was due. */
  private readonly outboxPackets: Array<Buffer | undefined> = [];
  private readonly outboxDue: number[] = [];
  /**
   * Packets waiting in the outbox. The arrays keep their length between ticks (slots are emptied,
   * not removed): setting an array's length to 0 drops its storage, and every frame would
   * allocate it again.
   */
  private outboxCount = 0;
  /** Frames sent since the last flush per lateness bucket, and their summed lateness (s): prom-client sees them once a second. */
  private readonly pendingLateness = new Uint32Array(metrics.PLAYOUT_LATENESS_BUCKETS.length + 1);
  private pendingLatenessSum = 0;

  constructor(options: RtpSendPathOptions) {
    this.context = options.context;
    this.config = options.config;
    this.sink = options.sink;
    const random = randomBytes(10);
    this.sendSsrc = random.readUInt32BE(0);
    this.timestampBase = random.readUInt32BE(4);
    this.sequence = random.readUInt16BE(8);
    this.frameSamples = samplesPerFrame(options.codec);
    this.sendTranscoder = new SendTranscoder({ wire: options.codec, model: options.model });
    this.silence = this.sendTranscoder.silenceFrame();
    this.playout = new Playout(
      options.config.comfortSilence ? { comfortSilence: this.silence } : {},
    );
    this.dtmfSender = new DtmfSender({ clockRate: options.codec.clockRate });
  }

  /** SSRC of what callgate sends; a new one after a codec change to another clock rate. */
  get ssrc(): number {
    return this.sendSsrc;
  }

  /** 20 ms of silence in the wire codec. */
  get wireSilence(): Buffer {
    return this.silence;
  }

  /** Whether RTP went out since the last report (a sender report then says how much). */
  get sentSinceReport(): boolean {
    return this.sentSinceReportFlag;
  }

  reported(): void {
    this.sentSinceReportFlag = false;
  }

  setSending(sending: boolean): void {
    if (sending && !this.sending) this.forceMarker = true;
    this.sending = sending;
  }

  play(itemId: string, audio: Buffer): void {
    if (this.clearedItems.includes(itemId)) return;
    if (this.encodingItem !== undefined && this.encodingItem !== itemId) this.finishEncoding();
    this.encodingItem = itemId;
    const frames = this.sendTranscoder.push(audio);
    if (frames.length === 0) return;
    const counts = this.context.counts;
    if ((this.playout.queuedFrames + frames.length) * FRAME_MS > MAX_QUEUED_MS) {
      if (counts.modelAudioRefusedMs === 0)
        this.context.logger.warn('model audio refused: playout queue full', {
          item_id: itemId,
          queued_ms: this.playout.queuedFrames * FRAME_MS,
        });
      counts.modelAudioRefusedMs += frames.length * FRAME_MS;
      return;
    }
    this.playout.enqueue(itemId, frames);
  }

  endItem(itemId: string): void {
    if (this.encodingItem === itemId) this.finishEncoding();
    const sentMs = this.playout.end(itemId);
    if (sentMs !== null) {
      this.rememberPlayed(itemId, sentMs);
      this.context.emit(rtpEvents.itemPlayed(itemId, sentMs));
    }
  }

  clear(): PlayoutClearResult | null {
    this.sendTranscoder.reset();
    if (this.encodingItem !== undefined) this.rememberCleared(this.encodingItem);
    this.encodingItem = undefined;
    const result = this.playout.clear();
    if (result) {
      this.rememberCleared(result.itemId);
      this.rememberPlayed(result.itemId, result.sentMs);
    }
    return result;
  }

  playback(): PlayoutPosition | null {
    return this.playout.position();
  }

  playedMs(itemId: string): number | undefined {
    const queued = this.playout.sentMsOf(itemId);
    if (queued !== null) return queued;
    for (let i = this.playedItems.length - 1; i >= 0; i--) {
      const item = this.playedItems[i];
      if (item?.itemId === itemId) return item.sentMs;
    }
    return undefined;
  }

  sendDigit(digit: DtmfDigit, durationMs?: number): void {
    if (this.context.telephoneEventPayloadType === undefined) return;
    this.dtmfSender.enqueue(digit, durationMs);
  }

  playoutStats(): PlayoutStats {
    return this.playout.stats();
  }

  /** Sent frames by lateness, in LATENESS_BIN_MS bins. */
  latenessHistogram(): Uint32Array {
    return this.latenessBins.slice();
  }

  /** The frame due at `index`: a digit's packet, or the playout's next frame, into the outbox. */
  sendFrame(index: number, dueMs: number): void {
    // With nowhere to send, audio stays queued: clear() must only count what really went out.
    if (!this.context.remote || !this.sending) return;
    const timestamp = this.timestampOf(index);
    const te = this.context.telephoneEventPayloadType;
    const dtmf = te === undefined ? null : this.dtmfSender.next(timestamp);
    if (dtmf && te !== undefined) {
      if (dtmf.marker) {
        this.context.counts.dtmfOut++;
        metrics.dtmfEvents.inc({ direction: 'out', source: 'rtp' });
      }
      this.sendRtp(te, dtmf.payload, dtmf.marker, dtmf.timestamp, dueMs);
      this.lastSentTimestamp = timestamp;
      this.lastSentDueMs = dueMs;
      return;
    }
    const frame = this.playout.next();
    if (frame.kind === 'idle') return;
    const marker = frame.kind === 'audio' && (frame.marker || this.forceMarker);
    this.forceMarker = false;
    this.sendRtp(this.context.codec.payloadType, frame.payload, marker, timestamp, dueMs);
    this.lastSentTimestamp = timestamp;
    this.lastSentDueMs = dueMs;
    if (frame.kind === 'audio' && frame.itemStarted)
      this.context.emit(rtpEvents.itemStarted(frame.itemId));
    if (frame.kind === 'audio' && frame.itemDone) {
      this.rememberPlayed(frame.itemId, frame.itemSentMs);
      this.context.emit(rtpEvents.itemPlayed(frame.itemId, frame.itemSentMs));
    }
  }

  /** Packets are waiting for flush(). */
  get hasOutbox(): boolean {
    return this.outboxCount > 0;
  }

  /**
   * Hands the packets the tick prepared to the socket. Lateness is measured here, at the write:
   * calls flushed later in the same wake-up are later by that much.
   */
  flush(now: number): void {
    const packets = this.outboxPackets;
    const count = this.outboxCount;
    if (count === 0) return;
    this.outboxCount = 0;
    const remote = this.context.remote;
    const c = this.context.counts;
    for (let i = 0; i < count; i++) {
      const packet = packets[i] as Buffer;
      packets[i] = undefined;
      if (remote && !this.closed) this.sink.sendRtp(packet, remote);
      const late = now - (this.outboxDue[i] as number);
      const latenessMs = late > 0 ? late : 0;
      c.latenessSum += latenessMs;
      c.latenessFrames++;
      if (latenessMs > c.latenessMax) c.latenessMax = latenessMs;
      const bin = Math.min(LATENESS_BINS - 1, Math.floor(latenessMs / LATENESS_BIN_MS));
      this.latenessBins[bin] = (this.latenessBins[bin] as number) + 1;
      const bucket = metrics.latenessBucket(latenessMs / 1000);
      this.pendingLateness[bucket] = (this.pendingLateness[bucket] as number) + 1;
      this.pendingLatenessSum += latenessMs / 1000;
    }
  }

  /** Adds the lateness measured since the last call to the process metrics. */
  flushLatenessMetrics(): void {
    metrics.addLateness(this.pendingLateness, this.pendingLatenessSum);
    this.pendingLateness.fill(0);
    this.pendingLatenessSum = 0;
  }

  /**
   * The RTP timestamp of the instant `nowMs` on the media clock (RFC 3550 §6.4.1: a sender report
   * pairs it with the wall clock of the same instant), from the last frame sent: not that frame's
   * own timestamp, which grows stale between talk spurts and is an event's start during a digit.
   */
  rtpTimestampAt(nowMs: number): number {
    return (
      (this.lastSentTimestamp +
        Math.round(((nowMs - this.lastSentDueMs) * this.context.codec.clockRate) / 1000)) >>>
      0
    );
  }

  /**
   * The send half of a codec change: the remainder of the item being encoded becomes a (padded)
   * frame of the old codec, then every queued frame is decoded and encoded again. Same clock rate:
   * sequence numbers and timestamps continue from `nextIndex`; another: a new SSRC with its own
   * sequence and timestamp origin (RFC 7160 §4.1). The next packet carries the marker.
   */
  changeCodec(
    previous: WireCodec,
    codec: WireCodec,
    model: ModelAudioFormat,
    nextIndex: number,
  ): void {
    const sendTranscoder = new SendTranscoder({ wire: codec, model });
    if (this.encodingItem !== undefined) {
      const last = this.sendTranscoder.flush();
      if (last.length > 0) this.playout.enqueue(this.encodingItem, last);
    }
    // Queued frames go from one wire codec to the other through PCM at a rate both code without
    // resampling where there is one (transcodingRate), not through the model's format: a resampler
    // there would delay the audio, leave the first frame silent and its tail in the next item.
    const pcm: ModelAudioFormat = {
      encoding: 'pcm16',
      sampleRate: transcodingRate(previous.name, codec.name),
    };
    const decodeOld = new ReceiveTranscoder({ wire: previous, model: pcm });
    const encodeNew = new SendTranscoder({ wire: codec, model: pcm });
    const wireSilence = sendTranscoder.silenceFrame();
    const spare: Buffer[] = [];
    this.playout.transform((payload) => {
      const audio = decodeOld.convert(payload);
      if (audio !== null) spare.push(...encodeNew.push(audio));
      return spare.shift() ?? wireSilence;
    });
    this.sendTranscoder = sendTranscoder;
    this.silence = wireSilence;
    if (this.config.comfortSilence) this.playout.setComfortSilence(wireSilence);
    if (codec.clockRate !== previous.clockRate) {
      const random = randomBytes(10);
      this.sendSsrc = random.readUInt32BE(0);
      this.timestampBase = random.readUInt32BE(4);
      this.sequence = random.readUInt16BE(8);
      this.sentSinceReportFlag = false;
      this.dtmfSender = this.dtmfSender.withClockRate(codec.clockRate);
    } else {
      this.timestampBase = this.timestampOf(nextIndex);
    }
    this.timestampIndex = nextIndex;
    this.frameSamples = samplesPerFrame(codec);
    this.forceMarker = true;
  }

  /** Hang-up: the outbox is dropped and nothing more goes out. */
  close(): void {
    this.closed = true;
    this.outboxPackets.length = 0;
    this.outboxDue.length = 0;
    this.outboxCount = 0;
  }

  private timestampOf(index: number): number {
    return (this.timestampBase + (index - this.timestampIndex) * this.frameSamples) >>> 0;
  }

  /** Builds the packet and queues it for flush(); sequence numbers and counts advance now. */
  private sendRtp(
    payloadType: number,
    payload: Buffer,
    marker: boolean,
    timestamp: number,
    dueMs: number,
  ): void {
    const remote = this.context.remote;
    if (!remote) return;
    // One buffer for header and payload: a single-element send, no header allocation of its own,
    // and nothing the caller keeps (playout frames can be views). The socket's ring hands back a
    // buffer sent before once the kernel has it, so a packet allocates nothing.
    const length = RTP_HEADER_BYTES + payload.length;
    const packet = this.sink.rtpPacketBuffer(length, remote);
    const sequence = this.sequence;
    const ssrc = this.sendSsrc;
    // Byte stores and TypedArray#set: Buffer's checked writers and copy() cost more per packet.
    packet[0] = RTP_VERSION << 6;
    packet[1] = (marker ? 0x80 : 0) | (payloadType & 0x7f);
    packet[2] = sequence >>> 8;
    packet[3] = sequence & 0xff;
    packet[4] = timestamp >>> 24;
    packet[5] = (timestamp >>> 16) & 0xff;
    packet[6] = (timestamp >>> 8) & 0xff;
    packet[7] = timestamp & 0xff;
    packet[8] = ssrc >>> 24;
    packet[9] = (ssrc >>> 16) & 0xff;
    packet[10] = (ssrc >>> 8) & 0xff;
    packet[11] = ssrc & 0xff;
    packet.set(payload, RTP_HEADER_BYTES);
    this.sequence = (this.sequence + 1) & 0xffff;
    this.outboxPackets[this.outboxCount] = packet;
    this.outboxDue[this.outboxCount] = dueMs;
    this.outboxCount++;
    const counts = this.context.counts;
    counts.packetsOut++;
    counts.bytesOut += length;
    this.sentSinceReportFlag = true;
  }

  private rememberCleared(itemId: string): void {
    if (this.clearedItems.includes(itemId)) return;
    this.clearedItems.push(itemId);
    if (this.clearedItems.length > REMEMBERED_CLEARED_ITEMS) this.clearedItems.shift();
  }

  private rememberPlayed(itemId: string, sentMs: number): void {
    this.playedItems.push({ itemId, sentMs });
    if (this.playedItems.length > REMEMBERED_PLAYED_ITEMS) this.playedItems.shift();
  }

  private finishEncoding(): void {
    const itemId = this.encodingItem;
    if (itemId === undefined) return;
    const last = this.sendTranscoder.flush();
    if (last.length > 0) this.playout.enqueue(itemId, last);
    this.encodingItem = undefined;
  }
}
