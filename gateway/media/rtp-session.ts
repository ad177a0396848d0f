/**
 * One call's media: RTP and RTCP sockets, the receive path (validation, symmetric-RTP latching,
 * jitter buffer, transcoding to the model's format, DTMF) and the send path (paced playout of
 * model items, DTMF, RTCP reports), ticked every 20 ms by the shared PlayoutScheduler. Nothing
 * the network sends can throw out of here: every datagram is either used or counted as dropped.
 *
 *   caller --RTP--> UdpPortPair -> parse -> latch/SSRC check -> JitterBuffer --tick--> ReceiveTranscoder -> 'audio' event
 *   model item --play()--> SendTranscoder -> Playout --tick--> RTP --> caller
 *
 * This facade wires four parts and keeps what they share (RtpSessionContext): latching
 * (RtpSourceLatch), the receive path (RtpReceivePath), the send path (RtpSendPath) and RTCP (RtpRtcp).
 */
import type { RemoteInfo } from 'node:dgram';
import type { RtpConfig } from '../../config/schema.ts';
import { rootLogger, type Logger } from '../../config/log.ts';
import type { ModelAudioFormat, WireCodec } from './audio-format.ts';
import { MAX_CATCH_UP_FRAMES, FrameSchedule } from './frame-schedule.ts';
import type { MediaTimer } from './media-timer.ts';
import * as metrics from './media-metrics.ts';
import { rtpSocketsEngine } from './native-rtp-sockets.ts';
import type { PlayoutClearResult, PlayoutPosition } from './playout.ts';
import type { PlayoutRegistration, PlayoutScheduler } from './playout-scheduler.ts';
import { RtpReceivePath } from './rtp-receive-path.ts';
import { parseRtpPacket, type RtpPacket } from './rtp-packet.ts';
import type { RtpPortAllocator } from './rtp-port-allocator.ts';
import { RtpRtcp, type RtcpReportSource } from './rtp-rtcp.ts';
import { RtpSendPath, type RtpSendPathOptions } from './rtp-send-path.ts';
import { newRtpCounts, type RtpSessionContext } from './rtp-session-context.ts';
import { rtpEvents, type RtpEndpoint, type RtpSessionEvent } from './rtp-session-events.ts';
import type { RtpSessionDropReason, RtpSessionStats } from './rtp-session-stats.ts';
import { RtpSourceLatch, type LatchDecision } from './rtp-source-latch.ts';
import { MediaSourcePolicy, type MediaSourcePolicyOptions } from './media-source-policy.ts';
import { countSrtpDrop } from './srtp-metrics.ts';
import { SrtpTransform, type SrtpDropReason, type SrtpKeys } from './srtp-transform.ts';
import type { DtmfDigit } from './telephone-event.ts';
import { UdpPortPair } from './udp-port-pair.ts';

export { RELATCH_AFTER_SILENCE_MS } from './rtp-source-latch.ts';
export { LATENESS_BIN_MS, MAX_QUEUED_MS } from './rtp-send-path.ts';

/** Metrics are flushed from per-call counters once a second, not per packet (hot path). */
const METRICS_FLUSH_FRAMES = 50;
/**
 * Scheduler weights, in PCMU-passthrough calls (10-20 µs per tick): Opus decode plus encode costs
 * about 130 µs per frame (measured with libopus here), G.711 <-> PCM16 resampling about 50 µs.
 * Heavier calls get fewer neighbours per send slot, so a slot's burst stays short.
 */
const OPUS_CALL_WEIGHT = 10;
const RESAMPLING_CALL_WEIGHT = 4;
/** G.722 to and from 24 kHz PCM: 1.4x a G.711 call's resampling (spandsp plus both resamplers). */
const G722_CALL_WEIGHT = 6;
/** Comfort noise (RFC 3389, static PT 13): keeps the stream alive, carries no audio we use. */
const COMFORT_NOISE_PAYLOAD_TYPE = 13;

/** What a re-INVITE changed: the wire codec, its telephone-event type, and optionally the model side. */
export interface RtpCodecChange {
  readonly codec: WireCodec;
  readonly telephoneEventPayloadType?: number;
  /** The model's format from here on; unchanged when omitted. */
  readonly model?: ModelAudioFormat;
}

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
  /** SRTP keys from the SDP (RTP/SAVP); plain RTP when absent. See setSrtp(). */
  readonly srtp?: SrtpKeys;
  /**
   * Who may send the call's media besides the SDP's address (`remote`, then each setRemote()): the
   * INVITE's source and the tenant's media ranges. Nothing else is latched (media-source-policy.ts).
   */
  readonly sources?: MediaSourcePolicyOptions;
}

type Listener = (event: RtpSessionEvent) => void;

/** The facade's writable view of what its parts read. */
type SharedState = { -readonly [K in keyof RtpSessionContext]: RtpSessionContext[K] };

/** Scheduler weight of a call: what its tick costs against a PCMU passthrough call. */
function callWeight(codec: WireCodec, passthrough: boolean): number {
  if (codec.name === 'G722') return G722_CALL_WEIGHT;
  return codec.name === 'opus' ? OPUS_CALL_WEIGHT : passthrough ? 1 : RESAMPLING_CALL_WEIGHT;
}

export class RtpSession {
  readonly localPort: number;
  readonly localAddress: string;
  private readonly options: RtpSessionOptions;
  private readonly sockets: UdpPortPair;
  private readonly logger: Logger;
  private readonly listeners = new Set<Listener>();
  private model: ModelAudioFormat;
  /** The codec, telephone-event type and remote, kept once here and read by the parts. */
  private readonly shared: SharedState;
  private readonly latch: RtpSourceLatch;
  private readonly receive: RtpReceivePath;
  private readonly send: RtpSendPath;
  private readonly rtcp: RtpRtcp;
  private readonly reportSource: RtcpReportSource;
  private readonly registration: PlayoutRegistration;
  private readonly schedule: FrameSchedule;
  private onHold = false;
  private closed = false;
  /**
   * SRTP of the call: undefined for plain RTP; `refused` when the keys could not be used (no
   * libsrtp, a refused key): then nothing is sent and everything received is dropped.
   */
  private srtp: SrtpTransform | 'refused' | undefined;
  /**
   * Ticks since metrics were last flushed; starts anywhere in the second so that calls opened
   * together do not all flush in the same wake-up.
   */
  private framesSinceFlush = Math.floor(Math.random() * METRICS_FLUSH_FRAMES);
  /** Frames the receive side owes since the last tick (played out to the model in afterFlush). */
  private receiveDue = 0;
  private tickedAtMs = 0;
  private afterTickPending = false;
  private readonly counts = newRtpCounts();
  private readonly dropped: Partial<Record<RtpSessionDropReason, number>> = {};
  /** What was last added to the process-wide metrics, to flush only differences. */
  private flushed = metrics.emptyMediaCounts();
  private readonly flushedDrops: Partial<Record<RtpSessionDropReason, number>> = {};

  private constructor(options: RtpSessionOptions, sockets: UdpPortPair) {
    this.options = options;
    this.sockets = sockets;
    this.localPort = sockets.port;
    this.localAddress = options.config.advertisedAddress ?? options.config.listen;
    this.logger = (options.logger ?? rootLogger()).child({
      component: 'rtp',
      rtp_port: sockets.port,
    });
    const codec = options.codec;
    this.model = options.model;
    this.latch = new RtpSourceLatch(
      new MediaSourcePolicy({
        ...options.sources,
        sdp: [
          ...(options.sources?.sdp ?? []),
          ...(options.remote === undefined ? [] : [options.remote.address]),
        ],
      }),
    );
    this.shared = {
      counts: this.counts,
      logger: this.logger,
      codec,
      telephoneEventPayloadType: options.telephoneEventPayloadType,
      remote: options.remote,
      emit: (event) => this.emit(event),
      drop: (reason) => this.drop(reason),
    };
    this.send = new RtpSendPath({
      context: this.shared,
      config: options.config,
      codec,
      model: options.model,
      sink: this.srtpSink(sockets),
    });
    const now = options.timer.now();
    this.receive = new RtpReceivePath({
      context: this.shared,
      config: options.config,
      codec,
      model: options.model,
      wireSilence: this.send.wireSilence,
      openedAt: now,
    });
    this.rtcp = new RtpRtcp({
      context: this.shared,
      sendRtcp: (data, to) => this.sendRtcp(data, to),
      cname: options.cname ?? `callgate@${this.localAddress}`,
      openedAt: now,
      ...(options.rtcpIntervalMs !== undefined && { intervalMs: options.rtcpIntervalMs }),
    });
    this.reportSource = this.rtcpReportSource();
    if (options.srtp !== undefined) this.setSrtp(options.srtp);
    this.registration = options.scheduler.add(this, callWeight(codec, this.receive.passthrough));
    this.schedule = new FrameSchedule({ startMs: this.registration.startMs });
    metrics.rtpSessions.inc();
    metrics.rtpSessionsOpened.inc();
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
      onError: (error) => {
        metrics.rtpSocketErrors.inc();
        ref.session?.logger.debug('media socket error', { error });
      },
      // A tick builds up to this many packets and its flush sends them.
      maxUnsentPackets: MAX_CATCH_UP_FRAMES,
      native: rtpSocketsEngine(options.config.sockets),
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

  /** SSRC of what callgate sends; a new one after a codec change to another clock rate. */
  get ssrc(): number {
    return this.send.ssrc;
  }

  /** The wire codec in use now. */
  get wireCodec(): WireCodec {
    return this.shared.codec;
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The SDP address of the far end (answer or re-INVITE): it is named from now on in place of the
   * SDP's earlier one, and latching starts over from it. `signaling` is where a re-INVITE came
   * from: named too, as the INVITE's source is (MediaSourcePolicy.nameSignaling).
   */
  setRemote(remote: RtpEndpoint, signaling?: string): void {
    if (signaling !== undefined) this.latch.sources.nameSignaling(signaling);
    // The RFC 2543 hold address is nowhere to send (Linux would deliver it to this host).
    this.shared.remote =
      remote.address === '0.0.0.0' || remote.address === '::' ? undefined : remote;
    this.rtcp.forgetRemote();
    this.latch.restart(remote.address);
  }

  /**
   * SRTP keys of the answer, the delayed offer's ACK or a re-INVITE (undefined: plain RTP from
   * here on). Keys that cannot be used (libsrtp missing or refusing them) fail closed: nothing is
   * sent and nothing received is used, and the error is logged without the keys.
   */
  setSrtp(keys: SrtpKeys | undefined): void {
    if (this.closed) return;
    const current = this.srtp;
    if (keys === undefined) {
      if (current instanceof SrtpTransform) current.dispose();
      this.srtp = undefined;
      return;
    }
    try {
      if (current instanceof SrtpTransform) current.rekey(keys);
      else this.srtp = new SrtpTransform(keys);
    } catch (error) {
      if (current instanceof SrtpTransform) current.dispose();
      this.srtp = 'refused';
      this.logger.error('SRTP could not start, the call media is dropped', {
        suite: keys.suite,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  /** Hold (sendonly/inactive from the far end): no media timeout while it lasts. */
  setHold(onHold: boolean): void {
    this.onHold = onHold;
    if (!onHold) this.receive.resumed(this.options.timer.now());
  }

  /**
   * Whether RTP may go to the far end: not while our answer is recvonly or inactive (RFC 3264
   * §6.1, a caller holding the call). Model audio stays queued meanwhile, as with nowhere to send,
   * so `clear()` counts only what went out; the first packet after carries the marker.
   */
  setSending(sending: boolean): void {
    this.send.setSending(sending);
  }

  /**
   * A re-INVITE changed the codec (PCMU to PCMA, G.711 to Opus...). What the jitter buffer holds
   * in the old codec goes to the model now; queued model audio is re-encoded, so the item goes on
   * where it was and `clear()` still counts right. Same clock rate: sequence numbers and
   * timestamps continue and the next packet carries the marker bit. Another clock rate: a new SSRC
   * with its own sequence and timestamp origin (RFC 7160 §4.1), since timestamps of two clocks
   * cannot continue one another. Latching starts over, as the caller may restart its stream too.
   */
  setCodec(change: RtpCodecChange): void {
    if (this.closed) return;
    const previous = this.shared.codec;
    const codec = change.codec;
    const model = change.model ?? this.model;
    const sameModel = JSON.stringify(model) === JSON.stringify(this.model);
    this.shared.telephoneEventPayloadType = change.telephoneEventPayloadType;
    if (
      previous.name === codec.name &&
      previous.payloadType === codec.payloadType &&
      previous.clockRate === codec.clockRate &&
      sameModel
    )
      return;
    this.receive.changeCodec(codec, model);
    this.rtcp.forgetSenderReport();
    this.latch.forget();
    this.send.changeCodec(previous, codec, model, this.schedule.nextIndex);
    this.receive.setWireSilence(this.send.wireSilence);
    this.model = model;
    this.shared.codec = codec;
    this.registration.setWeight(callWeight(codec, this.receive.passthrough));
    this.logger.info('codec changed', {
      from: previous.name,
      to: codec.name,
      payload_type: codec.payloadType,
    });
    this.emit(rtpEvents.codecChanged(previous, codec, this.send.ssrc));
  }

  /**
   * Queues model audio (in the model's format) of one output item for paced playout. The buffer
   * is the session's from here on (PCMU passthrough sends views of it): do not reuse it.
   */
  play(itemId: string, audio: Buffer): void {
    if (this.closed) return;
    this.send.play(itemId, audio);
  }

  /** The model finished the item: its last partial frame goes out padded with silence. */
  endItem(itemId: string): void {
    this.send.endItem(itemId);
  }

  /**
   * Barge-in: drops all queued audio at once. Returns the interrupted item and how many of its
   * milliseconds were sent, so the model's item can be truncated at what the caller heard.
   */
  clear(): PlayoutClearResult | null {
    return this.send.clear();
  }

  /**
   * Where playout is, without clearing it: the item playing (or next to play), its milliseconds
   * sent so far and still queued. Null when nothing is queued.
   */
  playback(): PlayoutPosition | null {
    return this.send.playback();
  }

  /**
   * Milliseconds of an item sent so far, without clearing anything: a queued item, or one of the
   * last finished or cleared ones. Undefined for an item this session never played.
   */
  playedMs(itemId: string): number | undefined {
    return this.send.playedMs(itemId);
  }

  sendDigit(digit: DtmfDigit, durationMs?: number): void {
    this.send.sendDigit(digit, durationMs);
  }

  /** A digit that came by signaling (SIP INFO) joins the same digit stream as RFC 4733 ones. */
  injectDigit(digit: DtmfDigit, durationMs?: number): void {
    if (this.closed) return;
    metrics.dtmfEvents.inc({ direction: 'in', source: 'sip-info' });
    this.counts.dtmfIn++;
    this.emit(rtpEvents.dtmf(digit, 'sip-info'));
    if (durationMs !== undefined) this.emit(rtpEvents.dtmfEnd(digit, durationMs, 'sip-info'));
  }

  /**
   * Called by the PlayoutScheduler at this call's slot: prepares the packets due by `nowMs`.
   * Only what goes on the wire happens here; the receive side waits for afterFlush().
   */
  tick(nowMs: number): void {
    if (this.closed) return;
    // Ticked again without a flush since (a caller other than the scheduler): that tick finishes first.
    if (this.send.hasOutbox) this.flush();
    if (this.afterTickPending) this.afterFlush();
    this.cutAfterStall(nowMs);
    const skippedBefore = this.schedule.skippedFrames;
    const dueCount = this.schedule.takeDue(nowMs);
    // After a long stall the send side skips frames (the model's audio is delayed), but the caller's
    // audio already arrived: the model gets all of it, or the jitter buffer would overflow.
    this.receiveDue += this.schedule.skippedFrames - skippedBefore + dueCount;
    this.tickedAtMs = nowMs;
    this.afterTickPending = true;
    if (dueCount > 0) {
      const first = this.schedule.firstDueIndex;
      for (let index = first; index < first + dueCount; index++)
        this.send.sendFrame(index, this.schedule.dueMsOf(index));
    }
  }

  /**
   * After a stall of `rtp.stallCutMs` or more (the process paused or starved), what the agent was
   * saying is dropped before anything more of it goes out, and the call is told: a sentence
   * resumed mid-word after seconds of dead air is not heard as one, and during a long stall a
   * janitor may have taken the result over (test/integration/media/rtp-session-stall-cut.test.ts).
   */
  private cutAfterStall(nowMs: number): void {
    const gapMs = this.tickedAtMs === 0 ? 0 : nowMs - this.tickedAtMs;
    if (gapMs < this.options.config.stallCutMs) return;
    const cleared = this.send.clear();
    if (cleared !== null) this.emit(rtpEvents.playoutStalled(gapMs, cleared));
  }

  /**
   * The rest of the tick, once every call of the wake-up has written its packets: caller audio
   * to the model (one frame per frame sent, as the jitter buffer plays), media timeout, RTCP,
   * metrics. Audio the model plays in answer is queued for the next tick, as it would be anyway.
   */
  afterFlush(): void {
    if (this.closed || !this.afterTickPending) return;
    this.afterTickPending = false;
    const nowMs = this.tickedAtMs;
    for (; this.receiveDue > 0; this.receiveDue--) this.receive.receiveFrame(nowMs);
    this.receive.checkMediaTimeout(nowMs, this.onHold);
    this.rtcp.tick(nowMs, this.reportSource);
    if (++this.framesSinceFlush >= METRICS_FLUSH_FRAMES) this.flushMetrics();
  }

  /**
   * Hands the packets tick() prepared to the socket. Lateness is measured here, at the write:
   * calls flushed later in the same wake-up are later by that much.
   */
  flush(): void {
    if (!this.send.hasOutbox) return;
    this.send.flush(this.options.timer.now());
  }

  stats(): RtpSessionStats {
    const jb = this.receive.jitterStats();
    const received = this.receive.receivedCounts(jb);
    const playout = this.send.playoutStats();
    const c = this.counts;
    return {
      packetsIn: c.packetsIn,
      bytesIn: c.bytesIn,
      packetsOut: c.packetsOut,
      bytesOut: c.bytesOut,
      dropped: { ...this.dropped },
      lost: this.receive.cumulativeLost,
      jitterMs: this.receive.statistics.jitterMs,
      late: received.late,
      duplicates: received.duplicates,
      discarded: received.discarded,
      hurried: received.hurried,
      concealed: received.concealed,
      receiveUnderruns: received.underruns,
      jitterDepthMs: jb.targetDepthMs,
      playoutUnderruns: playout.underruns,
      playoutLatenessMaxMs: c.latenessMax,
      playoutLatenessMeanMs: c.latenessFrames === 0 ? 0 : c.latenessSum / c.latenessFrames,
      playoutSkippedFrames: this.schedule.skippedFrames,
      modelAudioRefusedMs: c.modelAudioRefusedMs,
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
    return this.send.latenessHistogram();
  }

  get remoteEndpoint(): RtpEndpoint | undefined {
    return this.shared.remote;
  }

  /** Hang-up: stops sending and receiving, releases the ports, emits `closed`. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.send.close();
    if (this.srtp instanceof SrtpTransform) this.srtp.dispose();
    this.srtp = 'refused';
    this.registration.remove();
    this.flushMetrics();
    metrics.rtpSessions.dec();
    await this.sockets.close();
    const stats = this.stats();
    this.emit(rtpEvents.closed(stats));
    this.listeners.clear();
  }

  /** What an RTCP report reads of the send and receive paths, when one is due. */
  private rtcpReportSource(): RtcpReportSource {
    const { send, receive, latch } = this;
    return {
      get sendSsrc() {
        return send.ssrc;
      },
      get sentSinceReport() {
        return send.sentSinceReport;
      },
      rtpTimestampAt: (nowMs) => send.rtpTimestampAt(nowMs),
      reported: () => send.reported(),
      get latchedSsrc() {
        return latch.ssrc;
      },
      get receiveStats() {
        return receive.statistics;
      },
    };
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

  /**
   * The send path's packet sink: with SRTP, each packet buffer has room for the tag after it and
   * is protected in place just before it goes to the socket (native or dgram alike).
   */
  private srtpSink(sockets: UdpPortPair): RtpSendPathOptions['sink'] {
    // Views whose buffer was taken with room for the tag after them (pooled buffers share their
    // ArrayBuffer with others, so only these may be written past their end).
    const withRoom = new WeakSet<Buffer>();
    return {
      rtpPacketBuffer: (length, to) => {
        const srtp = this.srtp;
        if (!(srtp instanceof SrtpTransform)) return sockets.rtpPacketBuffer(length, to);
        const view = sockets.rtpPacketBuffer(length + srtp.trailerBytes, to).subarray(0, length);
        withRoom.add(view);
        return view;
      },
      sendRtp: (packet, to) => {
        const srtp = this.srtp;
        if (srtp === undefined) return sockets.sendRtp(packet, to);
        if (srtp === 'refused' || Array.isArray(packet)) return;
        const plain = packet;
        // Built before the keys came, with no room for the tag: not sent.
        if (!withRoom.has(plain)) return;
        const whole = Buffer.from(plain.buffer, plain.byteOffset, plain.length + srtp.trailerBytes);
        const length = srtp.protectRtp(whole, plain.length);
        if (length > 0) sockets.sendRtp(whole.subarray(0, length), to);
      },
    };
  }

  private sendRtcp(data: Buffer, to: RtpEndpoint): void {
    const srtp = this.srtp;
    if (srtp === undefined) return this.sockets.sendRtcp(data, to);
    if (srtp === 'refused') return;
    const secured = srtp.protectRtcp(data);
    if (secured !== undefined) this.sockets.sendRtcp(secured, to);
  }

  /** Unprotects an SRTP datagram; a failure is counted and the packet goes no further. */
  private unprotect(data: Buffer, packet: 'rtp' | 'rtcp'): Buffer | undefined {
    const srtp = this.srtp;
    if (srtp === undefined) return data;
    const plain =
      srtp === 'refused'
        ? 'srtp-unkeyed'
        : packet === 'rtp'
          ? srtp.unprotectRtp(data)
          : srtp.unprotectRtcp(data);
    if (typeof plain !== 'string') return plain;
    this.dropSrtp(plain, packet);
    return undefined;
  }

  private dropSrtp(reason: SrtpDropReason, packet: 'rtp' | 'rtcp'): void {
    this.drop(reason);
    countSrtpDrop(reason, packet);
  }

  private receiveRtp(datagram: Buffer, from: RemoteInfo): void {
    if (this.closed) return;
    this.counts.packetsIn++;
    // The datagram's own length: the native sockets keep only the first 2 KB of a longer one.
    this.counts.bytesIn += from.size;
    const data = this.unprotect(datagram, 'rtp');
    if (data === undefined) return;
    const parsed = parseRtpPacket(data);
    if (!parsed.ok) {
      this.drop(parsed.reason);
      return;
    }
    const packet = parsed.packet;
    const pt = packet.payloadType;
    if (
      pt !== this.shared.codec.payloadType &&
      pt !== this.shared.telephoneEventPayloadType &&
      pt !== COMFORT_NOISE_PAYLOAD_TYPE
    ) {
      this.drop('unknown-payload-type');
      return;
    }
    const now = this.options.timer.now();
    // The latched source (hot path).
    if (this.latch.fromLatched(packet, from, now)) {
      this.receive.accept(packet, now);
      return;
    }
    this.onLatchDecision(
      this.latch.admitOther(packet, from, now, pt === this.shared.telephoneEventPayloadType),
      packet,
      from,
      now,
    );
  }

  /** Acts on what latching decided for a packet not from the latched source (see RtpSourceLatch.admitOther). */
  private onLatchDecision(
    decision: LatchDecision,
    packet: RtpPacket,
    from: RemoteInfo,
    now: number,
  ): void {
    switch (decision.kind) {
      case 'drop':
        this.drop(decision.reason);
        return;
      case 'refused':
        this.drop('refused-source');
        if (decision.log)
          this.logger.warn('RTP from an address the call did not name is dropped', {
            source: `${from.address}:${from.port}`,
            named: this.latch.sources.describe(),
          });
        return;
      case 'side-event':
        this.receive.acceptSideEvent(packet, now);
        return;
      case 'latched': {
        this.shared.remote = { address: from.address, port: from.port };
        if (decision.previousSsrc !== undefined && decision.previousSsrc !== packet.ssrc)
          this.startNewStream(decision.previousSsrc, packet.ssrc);
        this.emit(rtpEvents.remoteLatched(this.shared.remote, packet.ssrc));
        this.receive.accept(packet, now);
        return;
      }
      case 'followed': {
        if (packet.ssrc !== decision.previous.ssrc)
          this.startNewStream(decision.previous.ssrc, packet.ssrc);
        if (decision.moved) {
          this.counts.relatches++;
          this.shared.remote = { address: from.address, port: from.port };
          this.rtcp.forgetRemote();
          this.emit(rtpEvents.remoteLatched(this.shared.remote, packet.ssrc));
        }
        // The held packets count as received (they were counted in) but no longer as dropped.
        const stillDropped = (this.dropped['ssrc-probation'] ?? 0) - decision.heldDrops;
        if (stillDropped > 0) this.dropped['ssrc-probation'] = stillDropped;
        else delete this.dropped['ssrc-probation'];
        for (const held of decision.held) this.receive.accept(held, now);
        return;
      }
    }
  }

  /** The caller's stream has a new SSRC: the receive path starts over, and RTCP with it. */
  private startNewStream(oldSsrc: number, newSsrc: number): void {
    this.counts.ssrcChanges++;
    this.receive.startNewStream();
    this.rtcp.forgetSenderReport();
    this.emit(rtpEvents.ssrcChanged(oldSsrc, newSsrc));
  }

  private receiveRtcp(datagram: Buffer, from: RemoteInfo): void {
    if (this.closed) return;
    const data = this.unprotect(datagram, 'rtcp');
    if (data === undefined) return;
    this.rtcp.receive(data, from, this.latch.ssrc, this.options.timer.now());
  }

  /** Adds what changed since the last flush to the process metrics (plain sums; prom-client reads them when scraped). */
  private flushMetrics(): void {
    this.framesSinceFlush = 0;
    this.send.flushLatenessMetrics();
    const received = this.receive.receivedCounts();
    const playout = this.send.playoutStats();
    const now: metrics.MediaCounts = {
      packetsIn: this.counts.packetsIn,
      bytesIn: this.counts.bytesIn,
      packetsOut: this.counts.packetsOut,
      bytesOut: this.counts.bytesOut,
      lost: received.lost,
      late: received.late,
      duplicates: received.duplicates,
      discarded: received.discarded,
      hurried: received.hurried,
      concealed: received.concealed,
      underruns: received.underruns,
      playoutUnderruns: playout.underruns,
      skipped: this.schedule.skippedFrames,
      rtcpIn: this.counts.rtcpIn,
      rtcpOut: this.counts.rtcpOut,
    };
    metrics.addMediaCounts(now, this.flushed);
    this.flushed = now;
    // Published counts only grow: held probation packets leave the drop count when their source
    // is followed, and those already published stay published rather than be counted twice later.
    for (const [reason, count] of Object.entries(this.dropped) as Array<
      [RtpSessionDropReason, number]
    >) {
      const published = this.flushedDrops[reason] ?? 0;
      if (count <= published) continue;
      metrics.addDrops(reason, count - published);
      this.flushedDrops[reason] = count;
    }
  }
}
