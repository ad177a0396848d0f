/**
 * One call's media: RTP and RTCP sockets, the receive path (validation, symmetric-RTP latching,
 * jitter buffer, transcoding to the model's format, DTMF) and the send path (paced playout of
 * model items, DTMF, RTCP reports), ticked every 20 ms by the shared PlayoutScheduler. Nothing
 * the network sends can throw out of here: every datagram is either used or counted as dropped.
 *
 *   caller --RTP--> UdpPortPair -> parse -> latch/SSRC check -> JitterBuffer --tick--> ReceiveTranscoder -> 'audio' event
 *   model item --play()--> SendTranscoder -> Playout --tick--> RTP --> caller
 */
import type { RemoteInfo } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import type { RtpConfig } from '../../config/schema.ts';
import { rootLogger, type Logger } from '../../config/log.ts';
import { samplesPerFrame, type ModelAudioFormat, type WireCodec } from './audio-format.ts';
import { DtmfReceiver } from './dtmf-receiver.ts';
import { DtmfSender } from './dtmf-sender.ts';
import { FrameSchedule } from './frame-schedule.ts';
import { concealG711Frame } from './g711-concealment.ts';
import { JitterBuffer } from './jitter-buffer.ts';
import type { MediaTimer } from './media-timer.ts';
import * as metrics from './media-metrics.ts';
import { Playout, type PlayoutClearResult } from './playout.ts';
import type { PlayoutRegistration, PlayoutScheduler } from './playout-scheduler.ts';
import { ReceiveStatistics } from './receive-statistics.ts';
import { ReceiveTranscoder } from './receive-transcoder.ts';
import { parseRtcpCompound, serializeRtcpReport } from './rtcp-packet.ts';
import { RTP_HEADER_BYTES, parseRtpPacket, serializeRtpHeader, type RtpPacket } from './rtp-packet.ts';
import type { RtpPortAllocator } from './rtp-port-allocator.ts';
import { rtpEvents, type RtpEndpoint, type RtpSessionEvent } from './rtp-session-events.ts';
import type { RtpSessionDropReason, RtpSessionStats } from './rtp-session-stats.ts';
import { SendTranscoder } from './send-transcoder.ts';
import type { DtmfDigit } from './telephone-event.ts';
import { UdpPortPair } from './udp-port-pair.ts';

/** RFC 3550 §6.2 minimum RTCP interval; randomized ±50% so calls do not report in lockstep. */
const RTCP_INTERVAL_MS = 5000;
/**
 * Consecutive packets a new SSRC from the latched address needs before the session follows it
 * (a carrier switching media servers); fewer, and one stray packet would reset the stream.
 */
const SSRC_CHANGE_PROBATION = 3;
/** Metrics are flushed from per-call counters once a second, not per packet (hot path). */
const METRICS_FLUSH_FRAMES = 50;
/** Per-call lateness histogram: 0.5 ms bins up to 100 ms (the last bin holds everything above). */
export const LATENESS_BIN_MS = 0.5;
const LATENESS_BINS = 201;
/**
 * Items cleared by barge-in that are remembered, so late audio deltas of a cancelled model
 * response are not played; a model sends at most a few responses' worth after a cancel.
 */
const REMEMBERED_CLEARED_ITEMS = 16;
/**
 * Scheduler weights, in PCMU-passthrough calls (10-20 µs per tick): Opus decode plus encode costs
 * about 130 µs per frame (measured with libopus here), G.711 <-> PCM16 resampling about 50 µs.
 * Heavier calls get fewer neighbours per send slot, so a slot's burst stays short.
 */
const OPUS_CALL_WEIGHT = 10;
const RESAMPLING_CALL_WEIGHT = 4;
/** Comfort noise (RFC 3389, static PT 13): keeps the stream alive, carries no audio we use. */
const COMFORT_NOISE_PAYLOAD_TYPE = 13;

export interface RtpSessionOptions {
  readonly config: RtpConfig;
  readonly ports: RtpPortAllocator;
  readonly scheduler: PlayoutScheduler;
  readonly timer: MediaTimer;
  /** The codec negotiated in SDP. */
  readonly codec: WireCodec;
  /** Payload type of telephone-event/8000 (or /48000) when negotiated. */
  readonly telephoneEventPayloadType?: number;
  readonly model: ModelAudioFormat;
  /** Where to send until the caller's packets show their real source (the SDP c=/m= address). */
  readonly remote?: RtpEndpoint;
  readonly logger?: Logger;
  readonly cname?: string;
  /** Mean RTCP report interval; RFC 3550's 5 s unless a test needs reports sooner. */
  readonly rtcpIntervalMs?: number;
}

type Listener = (event: RtpSessionEvent) => void;

export class RtpSession {
  readonly localPort: number;
  readonly localAddress: string;
  readonly ssrc: number;
  private readonly options: RtpSessionOptions;
  private readonly sockets: UdpPortPair;
  private readonly logger: Logger;
  private readonly listeners = new Set<Listener>();
  private readonly jitterBuffer: JitterBuffer;
  private readonly receiveTranscoder: ReceiveTranscoder;
  private readonly sendTranscoder: SendTranscoder;
  private readonly playout: Playout;
  private readonly dtmfReceiver = new DtmfReceiver();
  private readonly dtmfSender: DtmfSender;
  private readonly frameSamples: number;
  /** 20 ms of silence in the wire codec, encoded once. */
  private readonly wireSilence: Buffer;
  private readonly registration: PlayoutRegistration;
  private readonly schedule: FrameSchedule;
  private receiveStats: ReceiveStatistics;
  private remote: RtpEndpoint | undefined;
  private latchedSsrc: number | undefined;
  private candidateSsrc: { ssrc: number; count: number } | undefined;
  private readonly timestampBase: number;
  private sequence: number;
  /** Recently cleared items: audio that still arrives for them is dropped, not played. */
  private readonly clearedItems: string[] = [];
  /** Item whose audio is being encoded now: the send transcoder's remainder belongs to it. */
  private encodingItem: string | undefined;
  private onHold = false;
  private openedAt: number;
  private lastRtpAt: number | undefined;
  private timedOut = false;
  private closed = false;
  private nextRtcpAt: number;
  private lastSenderReport: { ntpMiddle: number; atMs: number } | undefined;
  private sentSinceReport = false;
  private lastSentTimestamp = 0;
  private framesSinceFlush = 0;
  private readonly counts = {
    packetsIn: 0,
    bytesIn: 0,
    packetsOut: 0,
    bytesOut: 0,
    dtmfIn: 0,
    dtmfOut: 0,
    rtcpIn: 0,
    rtcpOut: 0,
    ssrcChanges: 0,
    relatches: 0,
    latenessSum: 0,
    latenessMax: 0,
    latenessFrames: 0,
  };
  private readonly dropped: Partial<Record<RtpSessionDropReason, number>> = {};
  private readonly latenessBins = new Uint32Array(LATENESS_BINS);
  /** What was last added to the process-wide metrics, to flush only differences. */
  private flushed = { packetsIn: 0, bytesIn: 0, packetsOut: 0, bytesOut: 0, lost: 0, late: 0, duplicates: 0, discarded: 0, concealed: 0, underruns: 0, playoutUnderruns: 0, skipped: 0, rtcpIn: 0, rtcpOut: 0 };
  private readonly flushedDrops: Partial<Record<RtpSessionDropReason, number>> = {};

  private constructor(options: RtpSessionOptions, sockets: UdpPortPair) {
    this.options = options;
    this.sockets = sockets;
    this.localPort = sockets.port;
    this.localAddress = options.config.advertisedAddress ?? options.config.listen;
    this.logger = (options.logger ?? rootLogger()).child({ component: 'rtp', rtp_port: sockets.port });
    const random = randomBytes(10);
    this.ssrc = random.readUInt32BE(0);
    this.timestampBase = random.readUInt32BE(4);
    this.sequence = random.readUInt16BE(8);
    this.remote = options.remote;
    const codec = options.codec;
    this.frameSamples = samplesPerFrame(codec);
    const law = codec.name === 'opus' ? undefined : codec.name;
    this.jitterBuffer = new JitterBuffer({
      minDepthMs: options.config.jitterMinMs,
      maxDepthMs: options.config.jitterMaxMs,
      clockRate: codec.clockRate,
      ...(law ? { conceal: (previous: Buffer) => concealG711Frame(previous, law) } : {}),
    });
    this.receiveStats = new ReceiveStatistics(codec.clockRate);
    this.receiveTranscoder = new ReceiveTranscoder({ wire: codec, model: options.model });
    this.sendTranscoder = new SendTranscoder({ wire: codec, model: options.model });
    this.wireSilence = this.sendTranscoder.silenceFrame();
    this.playout = new Playout(options.config.comfortSilence ? { comfortSilence: this.wireSilence } : {});
    this.dtmfSender = new DtmfSender({ clockRate: codec.clockRate });
    const now = options.timer.now();
    this.openedAt = now;
    this.nextRtcpAt = now + (options.rtcpIntervalMs ?? RTCP_INTERVAL_MS) * (0.5 + Math.random());
    const weight = codec.name === 'opus' ? OPUS_CALL_WEIGHT : this.receiveTranscoder.passthrough ? 1 : RESAMPLING_CALL_WEIGHT;
    this.registration = options.scheduler.add(this, weight);
    this.schedule = new FrameSchedule({ startMs: this.registration.startMs });
    metrics.rtpSessions.inc();
  }

  /** Allocates a port pair and starts the session; throws CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED. */
  static async open(options: RtpSessionOptions): Promise<RtpSession> {
    // Sockets exist before the session does; datagrams in between are ignored.
    const ref: { session?: RtpSession } = {};
    const sockets = await UdpPortPair.bind({
      allocator: options.ports,
      address: options.config.listen,
      onRtp: (data, from) => ref.session?.receiveRtp(data, from),
      onRtcp: (data, from) => ref.session?.receiveRtcp(data, from),
      onError: (error) => ref.session?.logger.debug('media socket error', { error }),
    });
    try {
      ref.session = new RtpSession(options, sockets);
    } catch (error) {
      // A codec that cannot start must not keep the ports.
      await sockets.close();
      throw error;
    }
    return ref.session;
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The SDP address of the far end (answer or re-INVITE): latching starts over from it. */
  setRemote(remote: RtpEndpoint): void {
    this.remote = remote;
    this.latchedSsrc = undefined;
    this.candidateSsrc = undefined;
  }

  /** Hold (sendonly/inactive from the far end): no media timeout while it lasts. */
  setHold(onHold: boolean): void {
    this.onHold = onHold;
    if (!onHold) this.lastRtpAt = this.options.timer.now();
  }

  /**
   * Queues model audio (in the model's format) of one output item for paced playout. The buffer
   * is the session's from here on (PCMU passthrough sends views of it): do not reuse it.
   */
  play(itemId: string, audio: Buffer): void {
    if (this.closed || this.clearedItems.includes(itemId)) return;
    if (this.encodingItem !== undefined && this.encodingItem !== itemId) this.finishEncoding();
    this.encodingItem = itemId;
    const frames = this.sendTranscoder.push(audio);
    if (frames.length > 0) this.playout.enqueue(itemId, frames);
  }

  /** The model finished the item: its last partial frame goes out padded with silence. */
  endItem(itemId: string): void {
    if (this.encodingItem === itemId) this.finishEncoding();
    const sentMs = this.playout.end(itemId);
    if (sentMs !== null) this.emit(rtpEvents.itemPlayed(itemId, sentMs));
  }

  /**
   * Barge-in: drops all queued audio at once. Returns the interrupted item and how many of its
   * milliseconds were sent, so the model's item can be truncated at what the caller heard.
   */
  clear(): PlayoutClearResult | null {
    this.sendTranscoder.reset();
    if (this.encodingItem !== undefined) this.rememberCleared(this.encodingItem);
    this.encodingItem = undefined;
    const result = this.playout.clear();
    if (result) this.rememberCleared(result.itemId);
    return result;
  }

  sendDigit(digit: DtmfDigit, durationMs?: number): void {
    if (this.options.telephoneEventPayloadType === undefined) return;
    this.dtmfSender.enqueue(digit, durationMs);
  }

  /** A digit that came by signaling (SIP INFO) joins the same digit stream as RFC 4733 ones. */
  injectDigit(digit: DtmfDigit): void {
    if (this.closed) return;
    metrics.dtmfEvents.inc({ direction: 'in', source: 'sip-info' });
    this.counts.dtmfIn++;
    this.emit(rtpEvents.dtmf(digit, 'sip-info'));
  }

  /** Called by the PlayoutScheduler at this call's slot. */
  tick(nowMs: number): void {
    if (this.closed) return;
    const skippedBefore = this.schedule.skippedFrames;
    const dueFrames = this.schedule.due(nowMs);
    // After a long stall the send side skips frames (the model's audio is delayed), but the caller's
    // audio already arrived: the model gets all of it, or the jitter buffer would overflow.
    for (let i = this.schedule.skippedFrames - skippedBefore; i > 0; i--) this.receiveFrame(nowMs);
    for (const due of dueFrames) {
      // Measured at send time: calls ticked later in the same wake-up are later by that much.
      this.sendFrame(due.index, Math.max(0, this.options.timer.now() - due.dueMs));
      this.receiveFrame(nowMs);
    }
    this.checkMediaTimeout(nowMs);
    if (nowMs >= this.nextRtcpAt) {
      this.sendRtcpReport(nowMs);
      this.nextRtcpAt = nowMs + (this.options.rtcpIntervalMs ?? RTCP_INTERVAL_MS) * (0.5 + Math.random());
    }
    if (++this.framesSinceFlush >= METRICS_FLUSH_FRAMES) this.flushMetrics();
  }

  stats(): RtpSessionStats {
    const jb = this.jitterBuffer.stats();
    const playout = this.playout.stats();
    const c = this.counts;
    return {
      packetsIn: c.packetsIn,
      bytesIn: c.bytesIn,
      packetsOut: c.packetsOut,
      bytesOut: c.bytesOut,
      dropped: { ...this.dropped },
      lost: this.receiveStats.cumulativeLost,
      jitterMs: this.receiveStats.jitterMs,
      late: jb.late,
      duplicates: jb.duplicates,
      discarded: jb.discarded,
      concealed: jb.concealed,
      receiveUnderruns: jb.underruns,
      jitterDepthMs: jb.targetDepthMs,
      playoutUnderruns: playout.underruns,
      playoutLatenessMaxMs: c.latenessMax,
      playoutLatenessMeanMs: c.latenessFrames === 0 ? 0 : c.latenessSum / c.latenessFrames,
      playoutSkippedFrames: this.schedule.skippedFrames,
      dtmfIn: c.dtmfIn,
      dtmfOut: c.dtmfOut,
      rtcpIn: c.rtcpIn,
      rtcpOut: c.rtcpOut,
      ssrcChanges: c.ssrcChanges,
      relatches: c.relatches,
    };
  }

  /** Sent frames by lateness, in LATENESS_BIN_MS bins, for percentiles across calls. */
  latenessHistogram(): Uint32Array {
    return this.latenessBins.slice();
  }

  get remoteEndpoint(): RtpEndpoint | undefined {
    return this.remote;
  }

  /** Hang-up: stops sending and receiving, releases the ports, emits `closed`. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.registration.remove();
    this.flushMetrics();
    metrics.rtpSessions.dec();
    await this.sockets.close();
    const stats = this.stats();
    this.emit(rtpEvents.closed(stats));
    this.listeners.clear();
  }

  private emit(event: RtpSessionEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error('media event listener failed', { error, event: event.type });
      }
    }
  }

  private drop(reason: RtpSessionDropReason): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
  }

  private receiveRtp(data: Buffer, from: RemoteInfo): void {
    if (this.closed) return;
    this.counts.packetsIn++;
    this.counts.bytesIn += data.length;
    const parsed = parseRtpPacket(data);
    if (!parsed.ok) {
      this.drop(parsed.reason);
      return;
    }
    const packet = parsed.packet;
    const te = this.options.telephoneEventPayloadType;
    const isAudio = packet.payloadType === this.options.codec.payloadType;
    const isDtmf = te !== undefined && packet.payloadType === te;
    if (!isAudio && !isDtmf && packet.payloadType !== COMFORT_NOISE_PAYLOAD_TYPE) {
      this.drop('unknown-payload-type');
      return;
    }
    if (!this.admitSource(packet, from)) return;
    const now = this.options.timer.now();
    if (!this.receiveStats.update(packet.sequenceNumber, packet.timestamp, now, isAudio)) {
      this.drop('sequence-jump');
      return;
    }
    this.lastRtpAt = now;
    if (isDtmf) {
      this.receiveDtmf(packet, now);
      return;
    }
    if (!isAudio) {
      // Comfort noise holds its sequence number, like an event packet, so it is not taken for loss.
      this.jitterBuffer.push({ sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, payload: Buffer.alloc(0), filler: true }, now);
      return;
    }
    this.jitterBuffer.push({ sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, payload: packet.payload }, now);
  }

  /**
   * Symmetric RTP: the first valid packet latches the remote address and its SSRC. Later packets
   * of that SSRC may move (NAT rebinding); another SSRC is only followed from the latched
   * address and after SSRC_CHANGE_PROBATION consecutive packets; anything else is dropped.
   */
  private admitSource(packet: RtpPacket, from: RemoteInfo): boolean {
    const source: RtpEndpoint = { address: from.address, port: from.port };
    if (this.latchedSsrc === undefined) {
      this.latchedSsrc = packet.ssrc;
      this.latch(source, packet.ssrc);
      return true;
    }
    const fromRemote = this.remote !== undefined && this.remote.address === source.address && this.remote.port === source.port;
    if (packet.ssrc === this.latchedSsrc) {
      this.candidateSsrc = undefined;
      if (!fromRemote) {
        this.counts.relatches++;
        this.latch(source, packet.ssrc);
      }
      return true;
    }
    if (!fromRemote) {
      this.drop('unexpected-source');
      return false;
    }
    const candidate = this.candidateSsrc?.ssrc === packet.ssrc ? this.candidateSsrc : { ssrc: packet.ssrc, count: 0 };
    candidate.count++;
    this.candidateSsrc = candidate;
    if (candidate.count < SSRC_CHANGE_PROBATION) {
      this.drop('ssrc-probation');
      return false;
    }
    const previous = this.latchedSsrc;
    this.latchedSsrc = packet.ssrc;
    this.candidateSsrc = undefined;
    this.counts.ssrcChanges++;
    this.jitterBuffer.reset();
    this.dtmfReceiver.reset();
    this.receiveStats = new ReceiveStatistics(this.options.codec.clockRate);
    this.lastSenderReport = undefined;
    this.emit(rtpEvents.ssrcChanged(previous, packet.ssrc));
    return true;
  }

  private latch(source: RtpEndpoint, ssrc: number): void {
    this.remote = source;
    this.emit(rtpEvents.remoteLatched(source, ssrc));
  }

  private receiveDtmf(packet: RtpPacket, now: number): void {
    // The event packet takes a sequence number in the audio stream: hold its place.
    this.jitterBuffer.push({ sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, payload: Buffer.alloc(0), filler: true }, now);
    const result = this.dtmfReceiver.receive(packet);
    if (result.kind === 'digit') {
      this.counts.dtmfIn++;
      metrics.dtmfEvents.inc({ direction: 'in', source: 'rtp' });
      this.emit(rtpEvents.dtmf(result.digit, 'rtp'));
    }
  }

  private receiveRtcp(data: Buffer, _from: RemoteInfo): void {
    if (this.closed) return;
    const parsed = parseRtcpCompound(data);
    if (!parsed.ok) {
      this.drop('rtcp-invalid');
      return;
    }
    this.counts.rtcpIn++;
    if (parsed.summary.senderReportNtpMiddle !== undefined) {
      this.lastSenderReport = { ntpMiddle: parsed.summary.senderReportNtpMiddle, atMs: this.options.timer.now() };
    }
  }

  private sendFrame(index: number, latenessMs: number): void {
    // With nowhere to send, audio stays queued: clear() must only count what really went out.
    if (!this.remote) return;
    const timestamp = (this.timestampBase + index * this.frameSamples) >>> 0;
    const dtmf = this.options.telephoneEventPayloadType === undefined ? null : this.dtmfSender.next(timestamp);
    if (dtmf) {
      if (dtmf.marker) {
        this.counts.dtmfOut++;
        metrics.dtmfEvents.inc({ direction: 'out', source: 'rtp' });
      }
      this.sendRtp(this.options.telephoneEventPayloadType as number, dtmf.payload, dtmf.marker, dtmf.timestamp, latenessMs);
      return;
    }
    const frame = this.playout.next();
    if (frame.kind === 'idle') return;
    this.sendRtp(this.options.codec.payloadType, frame.payload, frame.kind === 'audio' && frame.marker, timestamp, latenessMs);
    if (frame.kind === 'audio' && frame.itemDone) this.emit(rtpEvents.itemPlayed(frame.itemId, frame.itemSentMs));
  }

  private sendRtp(payloadType: number, payload: Buffer, marker: boolean, timestamp: number, latenessMs: number): void {
    if (!this.remote) return;
    const header = serializeRtpHeader({ payloadType, marker, sequenceNumber: this.sequence, timestamp, ssrc: this.ssrc });
    this.sequence = (this.sequence + 1) & 0xffff;
    this.sockets.sendRtp([header, payload], this.remote);
    this.counts.packetsOut++;
    this.counts.bytesOut += RTP_HEADER_BYTES + payload.length;
    this.counts.latenessSum += latenessMs;
    this.counts.latenessFrames++;
    if (latenessMs > this.counts.latenessMax) this.counts.latenessMax = latenessMs;
    const bin = Math.min(LATENESS_BINS - 1, Math.floor(latenessMs / LATENESS_BIN_MS));
    this.latenessBins[bin] = (this.latenessBins[bin] as number) + 1;
    metrics.playoutLateness.observe(latenessMs / 1000);
    this.sentSinceReport = true;
    this.lastSentTimestamp = timestamp;
  }

  private receiveFrame(nowMs: number): void {
    const frame = this.jitterBuffer.pop(nowMs);
    if (frame.kind === 'frame' && !frame.filler) {
      this.deliver(frame.payload, false);
    } else if (frame.kind === 'frame' || frame.kind === 'concealed') {
      // A DTMF placeholder plays as concealment of the previous audio would: as silence.
      this.deliver(frame.kind === 'concealed' ? frame.payload : this.wireSilence, true);
    }
  }

  private deliver(payload: Buffer, concealed: boolean): void {
    const audio = this.receiveTranscoder.convert(payload);
    if (audio === null) {
      this.drop('undecodable');
      return;
    }
    if (audio.length > 0) this.emit(rtpEvents.audio(audio, concealed));
  }

  private checkMediaTimeout(now: number): void {
    if (this.onHold || this.timedOut) return;
    const since = this.lastRtpAt ?? this.openedAt;
    const silentMs = now - since;
    if (silentMs < this.options.config.mediaTimeoutMs) return;
    this.timedOut = true;
    metrics.mediaTimeouts.inc();
    this.logger.info('media timeout', { silent_ms: Math.round(silentMs) });
    this.emit(rtpEvents.mediaTimeout(this.lastRtpAt === undefined ? 'no-rtp-ever' : 'no-rtp', silentMs));
  }

  private sendRtcpReport(now: number): void {
    if (!this.remote) return;
    const block =
      this.latchedSsrc === undefined || this.receiveStats.packetsReceived === 0
        ? undefined
        : {
            ssrc: this.latchedSsrc,
            ...this.receiveStats.report(),
            lastSenderReport: this.lastSenderReport?.ntpMiddle ?? 0,
            delaySinceLastSenderReport: this.lastSenderReport ? Math.floor(((now - this.lastSenderReport.atMs) / 1000) * 65536) : 0,
          };
    if (block) metrics.rtpJitter.observe(this.receiveStats.jitterMs / 1000);
    const data = serializeRtcpReport({
      ssrc: this.ssrc,
      cname: this.options.cname ?? `callgate@${this.localAddress}`,
      ...(this.sentSinceReport
        ? { sender: { wallClockMs: Date.now(), rtpTimestamp: this.lastSentTimestamp, packets: this.counts.packetsOut, octets: this.counts.bytesOut } }
        : {}),
      ...(block ? { block } : {}),
    });
    this.sentSinceReport = false;
    // RTCP goes to the port above the (latched) RTP port (RFC 3550 §11).
    this.sockets.sendRtcp(data, { address: this.remote.address, port: this.remote.port + 1 });
    this.counts.rtcpOut++;
  }

  private rememberCleared(itemId: string): void {
    if (this.clearedItems.includes(itemId)) return;
    this.clearedItems.push(itemId);
    if (this.clearedItems.length > REMEMBERED_CLEARED_ITEMS) this.clearedItems.shift();
  }

  private finishEncoding(): void {
    const itemId = this.encodingItem;
    if (itemId === undefined) return;
    const last = this.sendTranscoder.flush();
    if (last) this.playout.enqueue(itemId, [last]);
    this.encodingItem = undefined;
  }

  private flushMetrics(): void {
    this.framesSinceFlush = 0;
    const jb = this.jitterBuffer.stats();
    const playout = this.playout.stats();
    const now = {
      packetsIn: this.counts.packetsIn,
      bytesIn: this.counts.bytesIn,
      packetsOut: this.counts.packetsOut,
      bytesOut: this.counts.bytesOut,
      lost: jb.lost,
      late: jb.late,
      duplicates: jb.duplicates,
      discarded: jb.discarded,
      concealed: jb.concealed,
      underruns: jb.underruns,
      playoutUnderruns: playout.underruns,
      skipped: this.schedule.skippedFrames,
      rtcpIn: this.counts.rtcpIn,
      rtcpOut: this.counts.rtcpOut,
    };
    const f = this.flushed;
    // Only what changed reaches prom-client: label lookups cost more than the whole idle tick.
    if (now.packetsIn > f.packetsIn) metrics.rtpPackets.inc({ direction: 'in' }, now.packetsIn - f.packetsIn);
    if (now.bytesIn > f.bytesIn) metrics.rtpBytes.inc({ direction: 'in' }, now.bytesIn - f.bytesIn);
    if (now.packetsOut > f.packetsOut) metrics.rtpPackets.inc({ direction: 'out' }, now.packetsOut - f.packetsOut);
    if (now.bytesOut > f.bytesOut) metrics.rtpBytes.inc({ direction: 'out' }, now.bytesOut - f.bytesOut);
    if (now.lost > f.lost) metrics.rtpLost.inc(now.lost - f.lost);
    if (now.late > f.late) metrics.rtpLate.inc(now.late - f.late);
    if (now.duplicates > f.duplicates) metrics.rtpDiscarded.inc({ reason: 'duplicate' }, now.duplicates - f.duplicates);
    if (now.discarded > f.discarded) metrics.rtpDiscarded.inc({ reason: 'overflow' }, now.discarded - f.discarded);
    if (now.concealed > f.concealed) metrics.rtpConcealed.inc(now.concealed - f.concealed);
    if (now.underruns > f.underruns) metrics.jitterUnderruns.inc(now.underruns - f.underruns);
    if (now.playoutUnderruns > f.playoutUnderruns) metrics.playoutUnderruns.inc(now.playoutUnderruns - f.playoutUnderruns);
    if (now.skipped > f.skipped) metrics.playoutSkipped.inc(now.skipped - f.skipped);
    if (now.rtcpIn > f.rtcpIn) metrics.rtcpPackets.inc({ direction: 'in' }, now.rtcpIn - f.rtcpIn);
    if (now.rtcpOut > f.rtcpOut) metrics.rtcpPackets.inc({ direction: 'out' }, now.rtcpOut - f.rtcpOut);
    this.flushed = now;
    for (const [reason, count] of Object.entries(this.dropped) as Array<[RtpSessionDropReason, number]>) {
      const delta = count - (this.flushedDrops[reason] ?? 0);
      if (delta > 0) metrics.rtpDropped.inc({ reason }, delta);
      this.flushedDrops[reason] = count;
    }
  }
}
