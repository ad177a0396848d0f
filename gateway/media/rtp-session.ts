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
import { FRAME_MS, samplesPerFrame, type ModelAudioFormat, type WireCodec } from './audio-format.ts';
import { DtmfReceiver } from './dtmf-receiver.ts';
import { DtmfSender } from './dtmf-sender.ts';
import { FrameSchedule, MAX_CATCH_UP_FRAMES } from './frame-schedule.ts';
import { concealG711Frame } from './g711-concealment.ts';
import { JitterBuffer, type JitterBufferStats, type JitterFrame } from './jitter-buffer.ts';
import type { MediaTimer } from './media-timer.ts';
import * as metrics from './media-metrics.ts';
import { rtpSocketsEngine } from './native-rtp-sockets.ts';
import { Playout, type PlayoutClearResult, type PlayoutPosition } from './playout.ts';
import type { PlayoutRegistration, PlayoutScheduler } from './playout-scheduler.ts';
import { ReceiveStatistics } from './receive-statistics.ts';
import { ReceiveTranscoder } from './receive-transcoder.ts';
import { parseRtcpCompound, serializeRtcpReport, type RtcpReportBlock } from './rtcp-packet.ts';
import { RTP_HEADER_BYTES, RTP_VERSION, parseRtpPacket, type RtpPacket } from './rtp-packet.ts';
import type { RtpPortAllocator } from './rtp-port-allocator.ts';
import { rtpEvents, type RtpEndpoint, type RtpSessionEvent } from './rtp-session-events.ts';
import type { RtpSessionDropReason, RtpSessionStats } from './rtp-session-stats.ts';
import { SendTranscoder } from './send-transcoder.ts';
import type { DtmfDigit } from './telephone-event.ts';
import { UdpPortPair } from './udp-port-pair.ts';

/** RFC 3550 §6.2 minimum RTCP interval; randomized ±50% so calls do not report in lockstep. */
const RTCP_INTERVAL_MS = 5000;
/**
 * Consecutive, in-sequence packets another source (a new SSRC, or the latched SSRC from another
 * address) must send before the session follows it; fewer, and one stray packet would reset the
 * stream. They are held, not lost: once the source is followed they play.
 */
const SSRC_CHANGE_PROBATION = 3;
/**
 * Symmetric RTP follows another source only after the latched one has sent nothing for this long
 * (a NAT rebinding, a carrier switching media servers without a re-INVITE). While the latched
 * source is live, nothing else is followed, whatever its SSRC: someone who sees or guesses the
 * SSRC cannot redirect the stream, and two senders cannot make it flip back and forth. The price
 * is at most this much caller audio lost at a genuine move. Well above a 20 ms packet interval
 * and a few packets of jitter; well below rtp.mediaTimeoutMs (at least 1 s, 30 s by default).
 */
export const RELATCH_AFTER_SILENCE_MS = 1000;
/**
 * Model audio queued for playout at most: a model streams faster than real time, but a reply
 * longer than five minutes is not one a caller waits through, and a server that streams without
 * end must not grow a call's memory without bound (five minutes of PCMU is 2.4 MB).
 */
export const MAX_QUEUED_MS = 300_000;
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
/** Finished and cleared items whose sent milliseconds stay readable with `playedMs()`. */
const REMEMBERED_PLAYED_ITEMS = 16;
const EMPTY_PAYLOAD = Buffer.alloc(0);

/** What a re-INVITE changed: the wire codec, its telephone-event type, and optionally the model side. */
export interface RtpCodecChange {
  readonly codec: WireCodec;
  readonly telephoneEventPayloadType?: number;
  /** The model's format from here on; unchanged when omitted. */
  readonly model?: ModelAudioFormat;
}

interface LatchedSource {
  readonly address: string;
  readonly port: number;
  readonly ssrc: number;
}

/** Another source on probation: the packets it sent in sequence so far, held until it is followed. */
interface CandidateSource extends LatchedSource {
  lastSequence: number;
  readonly held: RtpPacket[];
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
}

type Listener = (event: RtpSessionEvent) => void;

/** Scheduler weight of a call: what its tick costs against a PCMU passthrough call. */
function callWeight(codec: WireCodec, passthrough: boolean): number {
  return codec.name === 'opus' ? OPUS_CALL_WEIGHT : passthrough ? 1 : RESAMPLING_CALL_WEIGHT;
}

/**
 * A packet held past its datagram's handler (a new source on probation, possibly for the rest of
 * the call) with a payload of its own: a received datagram may be a view into a whole batch of
 * the native sockets' datagrams (up to 64 KB), which a kept view would keep alive.
 */
function keptPacket(packet: RtpPacket): RtpPacket {
  const extension = packet.extension === undefined ? undefined : { profile: packet.extension.profile, data: Buffer.from(packet.extension.data) };
  return { ...packet, payload: Buffer.from(packet.payload), ...(extension !== undefined && { extension }) };
}

function newJitterBuffer(config: RtpConfig, codec: WireCodec): JitterBuffer {
  const law = codec.name === 'opus' ? undefined : codec.name;
  return new JitterBuffer({
    minDepthMs: config.jitterMinMs,
    maxDepthMs: config.jitterMaxMs,
    clockRate: codec.clockRate,
    // The caller's audio goes to a speech model, which takes it faster than real time: the buffer
    // shrinks by handing frames out early, never by dropping what the caller said.
    shrink: 'play',
    ...(law ? { conceal: (previous: Buffer) => concealG711Frame(previous, law) } : {}),
  });
}

/** Receive-side counts of the jitter buffer, summed over the buffers a session has had. */
type ReceivedCounts = Pick<JitterBufferStats, 'lost' | 'late' | 'duplicates' | 'discarded' | 'hurried' | 'concealed' | 'underruns'>;

export class RtpSession {
  readonly localPort: number;
  readonly localAddress: string;
  private readonly options: RtpSessionOptions;
  private readonly sockets: UdpPortPair;
  private readonly logger: Logger;
  private readonly listeners = new Set<Listener>();
  private codec: WireCodec;
  private telephoneEventPayloadType: number | undefined;
  private model: ModelAudioFormat;
  private jitterBuffer: JitterBuffer;
  private receiveTranscoder: ReceiveTranscoder;
  private sendTranscoder: SendTranscoder;
  private readonly playout: Playout;
  private readonly dtmfReceiver = new DtmfReceiver();
  private dtmfSender: DtmfSender;
  private frameSamples: number;
  /** 20 ms of silence in the wire codec, encoded once. */
  private wireSilence: Buffer;
  private readonly registration: PlayoutRegistration;
  private readonly schedule: FrameSchedule;
  /** The jitter buffer's maximum depth in frames (rtp.jitterMaxMs). */
  private readonly maxReceiveFrames: number;
  private receiveStats: ReceiveStatistics;
  private remote: RtpEndpoint | undefined;
  /** Where the latched source's RTCP comes from, once it has sent some. */
  private rtcpRemote: RtpEndpoint | undefined;
  private latched: LatchedSource | undefined;
  /** The SSRC latched before setRemote() started latching over, until a source is latched again. */
  private unlatchedSsrc: number | undefined;
  /** When the latched source last sent a packet we accepted. */
  private latchedHeardAt = 0;
  private candidate: CandidateSource | undefined;
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
  private onHold = false;
  private sending = true;
  private openedAt: number;
  private lastRtpAt: number | undefined;
  private timedOut = false;
  private closed = false;
  private nextRtcpAt: number;
  private lastSenderReport: { ntpMiddle: number; atMs: number } | undefined;
  private sentSinceReport = false;
  /** The RTP timestamp of the last frame sent (audio or digit) and when it was due: the media clock. */
  private lastSentTimestamp = 0;
  private lastSentDueMs = 0;
  /**
   * Ticks since metrics were last flushed; starts anywhere in the second so that calls opened
   * together do not all flush in the same wake-up.
   */
  private framesSinceFlush = Math.floor(Math.random() * METRICS_FLUSH_FRAMES);
  /** Frames the receive side owes since the last tick (played out to the model in afterFlush). */
  private receiveDue = 0;
  private tickedAtMs = 0;
  private afterTickPending = false;
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
    modelAudioRefusedMs: 0,
    latenessSum: 0,
    latenessMax: 0,
    latenessFrames: 0,
  };
  private readonly dropped: Partial<Record<RtpSessionDropReason, number>> = {};
  private readonly latenessBins = new Uint32Array(LATENESS_BINS);
  /** Packets tick() prepared and flush() sends, with the time each was due. */
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
  /** What was last added to the process-wide metrics, to flush only differences. */
  private flushed = metrics.emptyMediaCounts();
  private readonly flushedDrops: Partial<Record<RtpSessionDropReason, number>> = {};
  /** Receive and send statistics of streams the session left behind (codec or SSRC changes). */
  private retired: ReceivedCounts & { rtpLost: number } = { rtpLost: 0, lost: 0, late: 0, duplicates: 0, discarded: 0, hurried: 0, concealed: 0, underruns: 0 };

  private constructor(options: RtpSessionOptions, sockets: UdpPortPair) {
    this.options = options;
    this.sockets = sockets;
    this.localPort = sockets.port;
    this.localAddress = options.config.advertisedAddress ?? options.config.listen;
    this.logger = (options.logger ?? rootLogger()).child({ component: 'rtp', rtp_port: sockets.port });
    const random = randomBytes(10);
    this.sendSsrc = random.readUInt32BE(0);
    this.timestampBase = random.readUInt32BE(4);
    this.sequence = random.readUInt16BE(8);
    this.remote = options.remote;
    const codec = options.codec;
    this.codec = codec;
    this.telephoneEventPayloadType = options.telephoneEventPayloadType;
    this.model = options.model;
    this.frameSamples = samplesPerFrame(codec);
    this.jitterBuffer = newJitterBuffer(options.config, codec);
    this.maxReceiveFrames = Math.max(1, Math.floor(options.config.jitterMaxMs / FRAME_MS));
    this.receiveStats = new ReceiveStatistics(codec.clockRate);
    this.receiveTranscoder = new ReceiveTranscoder({ wire: codec, model: options.model });
    this.sendTranscoder = new SendTranscoder({ wire: codec, model: options.model });
    this.wireSilence = this.sendTranscoder.silenceFrame();
    this.playout = new Playout(options.config.comfortSilence ? { comfortSilence: this.wireSilence } : {});
    this.dtmfSender = new DtmfSender({ clockRate: codec.clockRate });
    const now = options.timer.now();
    this.openedAt = now;
    this.nextRtcpAt = now + (options.rtcpIntervalMs ?? RTCP_INTERVAL_MS) * (0.5 + Math.random());
    this.registration = options.scheduler.add(this, callWeight(codec, this.receiveTranscoder.passthrough));
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
    return this.sendSsrc;
  }

  /** The wire codec in use now. */
  get wireCodec(): WireCodec {
    return this.codec;
  }

  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The SDP address of the far end (answer or re-INVITE): latching starts over from it. */
  setRemote(remote: RtpEndpoint): void {
    // The RFC 2543 hold address is nowhere to send (Linux would deliver it to this host).
    this.remote = remote.address === '0.0.0.0' || remote.address === '::' ? undefined : remote;
    this.rtcpRemote = undefined;
    this.unlatchedSsrc = this.latched?.ssrc ?? this.unlatchedSsrc;
    this.latched = undefined;
    this.candidate = undefined;
  }

  /** Hold (sendonly/inactive from the far end): no media timeout while it lasts. */
  setHold(onHold: boolean): void {
    this.onHold = onHold;
    if (!onHold) this.lastRtpAt = this.options.timer.now();
  }

  /**
   * Whether RTP may go to the far end: not while our answer is recvonly or inactive (RFC 3264
   * §6.1, a caller holding the call). Model audio stays queued meanwhile, as with nowhere to send,
   * so `clear()` counts only what went out; the first packet after carries the marker.
   */
  setSending(sending: boolean): void {
    if (sending && !this.sending) this.forceMarker = true;
    this.sending = sending;
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
    const previous = this.codec;
    const codec = change.codec;
    const model = change.model ?? this.model;
    const sameModel = JSON.stringify(model) === JSON.stringify(this.model);
    this.telephoneEventPayloadType = change.telephoneEventPayloadType;
    if (previous.name === codec.name && previous.payloadType === codec.payloadType && previous.clockRate === codec.clockRate && sameModel) return;
    // Receive side: buffered caller audio of the old codec is delivered, then the stream starts over.
    this.drainReceive();
    this.retireReceiveStats();
    this.retireJitterBuffer();
    this.jitterBuffer = newJitterBuffer(this.options.config, codec);
    this.receiveStats = new ReceiveStatistics(codec.clockRate);
    this.receiveTranscoder = new ReceiveTranscoder({ wire: codec, model });
    this.lastSenderReport = undefined;
    this.dtmfReceiver.reset();
    this.latched = undefined;
    this.candidate = undefined;
    // Send side: the remainder of the item being encoded becomes a (padded) frame of the old codec,
    // then every queued frame is decoded and encoded again.
    const sendTranscoder = new SendTranscoder({ wire: codec, model });
    if (this.encodingItem !== undefined) {
      const last = this.sendTranscoder.flush();
      if (last.length > 0) this.playout.enqueue(this.encodingItem, last);
    }
    // Queued frames go from one wire codec to the other through PCM at a rate both code without
    // resampling (8 kHz unless both are Opus), not through the model's format: a resampler there
    // would delay the audio, leave the first frame silent and its tail in the item that follows.
    const pcm: ModelAudioFormat = { encoding: 'pcm16', sampleRate: previous.name === 'opus' && codec.name === 'opus' ? 48000 : 8000 };
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
    this.model = model;
    this.wireSilence = wireSilence;
    if (this.options.config.comfortSilence) this.playout.setComfortSilence(wireSilence);
    const next = this.schedule.nextIndex;
    if (codec.clockRate !== previous.clockRate) {
      const random = randomBytes(10);
      this.sendSsrc = random.readUInt32BE(0);
      this.timestampBase = random.readUInt32BE(4);
      this.sequence = random.readUInt16BE(8);
      this.sentSinceReport = false;
      this.dtmfSender = this.dtmfSender.withClockRate(codec.clockRate);
    } else {
      this.timestampBase = this.timestampOf(next);
    }
    this.timestampIndex = next;
    this.frameSamples = samplesPerFrame(codec);
    this.forceMarker = true;
    this.codec = codec;
    this.registration.setWeight(callWeight(codec, this.receiveTranscoder.passthrough));
    this.logger.info('codec changed', { from: previous.name, to: codec.name, payload_type: codec.payloadType });
    this.emit(rtpEvents.codecChanged(previous, codec, this.sendSsrc));
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
    if (frames.length === 0) return;
    if ((this.playout.queuedFrames + frames.length) * FRAME_MS > MAX_QUEUED_MS) {
      if (this.counts.modelAudioRefusedMs === 0) this.logger.warn('model audio refused: playout queue full', { item_id: itemId, queued_ms: this.playout.queuedFrames * FRAME_MS });
      this.counts.modelAudioRefusedMs += frames.length * FRAME_MS;
      return;
    }
    this.playout.enqueue(itemId, frames);
  }

  /** The model finished the item: its last partial frame goes out padded with silence. */
  endItem(itemId: string): void {
    if (this.encodingItem === itemId) this.finishEncoding();
    const sentMs = this.playout.end(itemId);
    if (sentMs !== null) {
      this.rememberPlayed(itemId, sentMs);
      this.emit(rtpEvents.itemPlayed(itemId, sentMs));
    }
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
    if (result) {
      this.rememberCleared(result.itemId);
      this.rememberPlayed(result.itemId, result.sentMs);
    }
    return result;
  }

  /**
   * Where playout is, without clearing it: the item playing (or next to play), its milliseconds
   * sent so far and still queued. Null when nothing is queued.
   */
  playback(): PlayoutPosition | null {
    return this.playout.position();
  }

  /**
   * Milliseconds of an item sent so far, without clearing anything: a queued item, or one of the
   * last finished or cleared ones. Undefined for an item this session never played.
   */
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
    if (this.telephoneEventPayloadType === undefined) return;
    this.dtmfSender.enqueue(digit, durationMs);
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
    if (this.outboxCount > 0) this.flush();
    if (this.afterTickPending) this.afterFlush();
    const skippedBefore = this.schedule.skippedFrames;
    const dueCount = this.schedule.takeDue(nowMs);
    // After a long stall the send side skips frames (the model's audio is delayed), but the caller's
    // audio already arrived: the model gets all of it, or the jitter buffer would overflow.
    this.receiveDue += this.schedule.skippedFrames - skippedBefore + dueCount;
    this.tickedAtMs = nowMs;
    this.afterTickPending = true;
    if (dueCount > 0) {
      const first = this.schedule.firstDueIndex;
      for (let index = first; index < first + dueCount; index++) this.sendFrame(index, this.schedule.dueMsOf(index));
    }
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
    for (; this.receiveDue > 0; this.receiveDue--) this.receiveFrame(nowMs);
    this.checkMediaTimeout(nowMs);
    if (nowMs >= this.nextRtcpAt) {
      this.nextRtcpAt = nowMs + (this.options.rtcpIntervalMs ?? RTCP_INTERVAL_MS) * (0.5 + Math.random());
      this.sendRtcpReport(nowMs);
    }
    if (++this.framesSinceFlush >= METRICS_FLUSH_FRAMES) this.flushMetrics();
  }

  /**
   * Hands the packets tick() prepared to the socket. Lateness is measured here, at the write:
   * calls flushed later in the same wake-up are later by that much.
   */
  flush(): void {
    const packets = this.outboxPackets;
    const count = this.outboxCount;
    if (count === 0) return;
    this.outboxCount = 0;
    const remote = this.remote;
    const now = this.options.timer.now();
    const c = this.counts;
    for (let i = 0; i < count; i++) {
      const packet = packets[i] as Buffer;
      packets[i] = undefined;
      if (remote && !this.closed) this.sockets.sendRtp(packet, remote);
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

  stats(): RtpSessionStats {
    const jb = this.jitterBuffer.stats();
    const received = this.receivedCounts(jb);
    const playout = this.playout.stats();
    const c = this.counts;
    const r = this.retired;
    return {
      packetsIn: c.packetsIn,
      bytesIn: c.bytesIn,
      packetsOut: c.packetsOut,
      bytesOut: c.bytesOut,
      dropped: { ...this.dropped },
      lost: this.receiveStats.cumulativeLost + r.rtpLost,
      jitterMs: this.receiveStats.jitterMs,
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
    return this.latenessBins.slice();
  }

  get remoteEndpoint(): RtpEndpoint | undefined {
    return this.remote;
  }

  /** Hang-up: stops sending and receiving, releases the ports, emits `closed`. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.outboxPackets.length = 0;
    this.outboxDue.length = 0;
    this.outboxCount = 0;
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
    // The datagram's own length: the native sockets keep only the first 2 KB of a longer one.
    this.counts.bytesIn += from.size;
    const parsed = parseRtpPacket(data);
    if (!parsed.ok) {
      this.drop(parsed.reason);
      return;
    }
    const packet = parsed.packet;
    const pt = packet.payloadType;
    if (pt !== this.codec.payloadType && pt !== this.telephoneEventPayloadType && pt !== COMFORT_NOISE_PAYLOAD_TYPE) {
      this.drop('unknown-payload-type');
      return;
    }
    const now = this.options.timer.now();
    const latched = this.latched;
    if (latched !== undefined && packet.ssrc === latched.ssrc && from.port === latched.port && from.address === latched.address) {
      // The latched source (hot path).
      this.latchedHeardAt = now;
      this.candidate = undefined;
      this.accept(packet, now);
      return;
    }
    this.admitOtherSource(packet, from, now);
  }

  /**
   * Symmetric RTP, for every packet not from the latched source: the first valid packet of the
   * call latches its address, port and SSRC. After that another source (a new SSRC, or the same
   * SSRC from another address) is followed only once the latched source has been silent for
   * RELATCH_AFTER_SILENCE_MS and the new one has sent SSRC_CHANGE_PROBATION packets in sequence;
   * until then its packets are dropped (counted), and the held probation packets play once it is
   * followed. See RELATCH_AFTER_SILENCE_MS for why.
   */
  private admitOtherSource(packet: RtpPacket, from: RemoteInfo, now: number): void {
    const latched = this.latched;
    if (latched === undefined) {
      this.latched = { address: from.address, port: from.port, ssrc: packet.ssrc };
      this.latchedHeardAt = now;
      this.remote = { address: from.address, port: from.port };
      // After a re-INVITE the stream may start over with a new SSRC and its own sequence numbers.
      const before = this.unlatchedSsrc;
      this.unlatchedSsrc = undefined;
      if (before !== undefined && before !== packet.ssrc) this.startNewStream(before, packet.ssrc);
      this.emit(rtpEvents.remoteLatched(this.remote, packet.ssrc));
      this.accept(packet, now);
      return;
    }
    const fromLatchedAddress = from.address === latched.address && from.port === latched.port;
    if (now - this.latchedHeardAt < RELATCH_AFTER_SILENCE_MS) {
      // The latched source is live: nothing else is followed, and no probation builds up meanwhile.
      this.candidate = undefined;
      this.drop(fromLatchedAddress ? 'ssrc-probation' : 'unexpected-source');
      return;
    }
    let candidate = this.candidate;
    const sameCandidate = candidate !== undefined && candidate.ssrc === packet.ssrc && candidate.port === from.port && candidate.address === from.address;
    if (candidate !== undefined && sameCandidate) {
      const step = (packet.sequenceNumber - candidate.lastSequence) & 0xffff;
      if (step === 0) {
        // A repeated packet (RFC 4733 end packets repeat their sequence number): keep, do not count.
        if (candidate.held.length < SSRC_CHANGE_PROBATION * 2) candidate.held.push(keptPacket(packet));
        this.drop('ssrc-probation');
        return;
      }
      if (step !== 1) candidate = undefined;
    } else {
      candidate = undefined;
    }
    if (candidate === undefined) {
      candidate = { address: from.address, port: from.port, ssrc: packet.ssrc, lastSequence: packet.sequenceNumber, held: [keptPacket(packet)] };
      this.candidate = candidate;
    } else {
      candidate.lastSequence = packet.sequenceNumber;
      candidate.held.push(keptPacket(packet));
    }
    let inSequence = 0;
    let previousSequence = -1;
    for (const held of candidate.held) {
      if (held.sequenceNumber !== previousSequence) inSequence++;
      previousSequence = held.sequenceNumber;
    }
    if (inSequence < SSRC_CHANGE_PROBATION) {
      this.drop('ssrc-probation');
      return;
    }
    // Followed: the new source is the latched one from here on; the old one is a stranger now.
    this.candidate = undefined;
    this.latched = { address: from.address, port: from.port, ssrc: packet.ssrc };
    this.latchedHeardAt = now;
    if (packet.ssrc !== latched.ssrc) this.startNewStream(latched.ssrc, packet.ssrc);
    if (!fromLatchedAddress) {
      this.counts.relatches++;
      this.remote = { address: from.address, port: from.port };
      this.rtcpRemote = undefined;
      this.emit(rtpEvents.remoteLatched(this.remote, packet.ssrc));
    }
    // The held packets count as received (they were counted in) but no longer as dropped.
    const stillDropped = (this.dropped['ssrc-probation'] ?? 0) - (candidate.held.length - 1);
    if (stillDropped > 0) this.dropped['ssrc-probation'] = stillDropped;
    else delete this.dropped['ssrc-probation'];
    for (const held of candidate.held) this.accept(held, now);
  }

  /**
   * The caller's stream has a new SSRC: what is buffered of the old one goes to the model, then
   * the jitter buffer, statistics and DTMF start over, as the new stream's sequence numbers and
   * timestamps have nothing to do with the old ones.
   */
  private startNewStream(oldSsrc: number, newSsrc: number): void {
    this.counts.ssrcChanges++;
    this.drainReceive();
    this.retireReceiveStats();
    this.jitterBuffer.reset();
    this.dtmfReceiver.reset();
    this.receiveStats = new ReceiveStatistics(this.codec.clockRate);
    this.lastSenderReport = undefined;
    this.emit(rtpEvents.ssrcChanged(oldSsrc, newSsrc));
  }

  /** A packet of the latched source: statistics, then DTMF or the jitter buffer. */
  private accept(packet: RtpPacket, now: number): void {
    const pt = packet.payloadType;
    const isAudio = pt === this.codec.payloadType;
    if (!this.receiveStats.update(packet.sequenceNumber, packet.timestamp, now, isAudio)) {
      this.drop('sequence-jump');
      return;
    }
    this.lastRtpAt = now;
    if (pt === this.telephoneEventPayloadType && !isAudio) {
      this.receiveDtmf(packet, now);
      return;
    }
    if (!isAudio) {
      // Comfort noise holds its sequence number, like an event packet, so it is not taken for loss.
      this.jitterBuffer.push({ sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, payload: EMPTY_PAYLOAD, filler: true }, now);
      return;
    }
    this.jitterBuffer.push(packet, now);
    // A stall of this process (a GC pause, a busy core) leaves the caller's packets queued in the
    // socket, and they arrive here all at once. Past the buffer's maximum depth the oldest frame
    // goes to the model now instead of being discarded: the model buffers audio itself, and caller
    // speech dropped because of our own stall would be words it never hears.
    if (this.jitterBuffer.depthFrames() > this.maxReceiveFrames) this.receiveFrame(now);
  }

  private receiveDtmf(packet: RtpPacket, now: number): void {
    // The event packet takes a sequence number in the audio stream: hold its place.
    this.jitterBuffer.push({ sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp, payload: EMPTY_PAYLOAD, filler: true }, now);
    const result = this.dtmfReceiver.receive(packet);
    if (result.kind === 'digit') {
      this.counts.dtmfIn++;
      metrics.dtmfEvents.inc({ direction: 'in', source: 'rtp' });
      this.emit(rtpEvents.dtmf(result.digit, 'rtp'));
      if (result.endedDuration !== undefined) this.emit(rtpEvents.dtmfEnd(result.digit, (result.endedDuration * 1000) / this.codec.clockRate, 'rtp'));
    } else if (result.kind === 'end') {
      this.emit(rtpEvents.dtmfEnd(result.digit, (result.duration * 1000) / this.codec.clockRate, 'rtp'));
    }
  }

  private receiveRtcp(data: Buffer, from: RemoteInfo): void {
    if (this.closed) return;
    const parsed = parseRtcpCompound(data);
    if (!parsed.ok) {
      this.drop('rtcp-invalid');
      return;
    }
    this.counts.rtcpIn++;
    const latched = this.latched;
    // Another sender's report says nothing of the stream we receive.
    if (latched !== undefined && parsed.summary.senderSsrc !== latched.ssrc) return;
    // The far end's reports (of the latched source, or from the SDP address before any RTP): ours
    // go back where they come from.
    const heard = this.rtcpRemote;
    if (from.address === this.remote?.address && (heard === undefined || heard.port !== from.port || heard.address !== from.address)) {
      this.rtcpRemote = { address: from.address, port: from.port };
    }
    if (parsed.summary.senderReportNtpMiddle !== undefined) {
      this.lastSenderReport = { ntpMiddle: parsed.summary.senderReportNtpMiddle, atMs: this.options.timer.now() };
    }
  }

  /**
   * The RTP timestamp of the instant `nowMs` on the media clock (RFC 3550 §6.4.1: a sender report
   * pairs it with the wall clock of the same instant), from the last frame sent: not that frame's
   * own timestamp, which grows stale between talk spurts and is an event's start during a digit.
   */
  private rtpTimestampAt(nowMs: number): number {
    return (this.lastSentTimestamp + Math.round(((nowMs - this.lastSentDueMs) * this.codec.clockRate) / 1000)) >>> 0;
  }

  private timestampOf(index: number): number {
    return (this.timestampBase + (index - this.timestampIndex) * this.frameSamples) >>> 0;
  }

  private sendFrame(index: number, dueMs: number): void {
    // With nowhere to send, audio stays queued: clear() must only count what really went out.
    if (!this.remote || !this.sending) return;
    const timestamp = this.timestampOf(index);
    const te = this.telephoneEventPayloadType;
    const dtmf = te === undefined ? null : this.dtmfSender.next(timestamp);
    if (dtmf && te !== undefined) {
      if (dtmf.marker) {
        this.counts.dtmfOut++;
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
    this.sendRtp(this.codec.payloadType, frame.payload, marker, timestamp, dueMs);
    this.lastSentTimestamp = timestamp;
    this.lastSentDueMs = dueMs;
    if (frame.kind === 'audio' && frame.itemStarted) this.emit(rtpEvents.itemStarted(frame.itemId));
    if (frame.kind === 'audio' && frame.itemDone) {
      this.rememberPlayed(frame.itemId, frame.itemSentMs);
      this.emit(rtpEvents.itemPlayed(frame.itemId, frame.itemSentMs));
    }
  }

  /** Builds the packet and queues it for flush(); sequence numbers and counts advance now. */
  private sendRtp(payloadType: number, payload: Buffer, marker: boolean, timestamp: number, dueMs: number): void {
    if (!this.remote) return;
    // One buffer for header and payload: a single-element send, no header allocation of its own,
    // and nothing the caller keeps (playout frames can be views). The socket's ring hands back a
    // buffer sent before once the kernel has it, so a packet allocates nothing.
    const length = RTP_HEADER_BYTES + payload.length;
    const packet = this.sockets.rtpPacketBuffer(length, this.remote);
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
    this.counts.packetsOut++;
    this.counts.bytesOut += length;
    this.sentSinceReport = true;
  }

  private receiveFrame(nowMs: number): void {
    this.deliverFrame(this.jitterBuffer.pop(nowMs));
    const surplus = this.jitterBuffer.popSurplus();
    if (surplus !== undefined) this.deliverFrame(surplus);
  }

  private deliverFrame(frame: JitterFrame): void {
    if (frame.kind === 'frame' && !frame.filler) {
      this.deliver(frame.payload, false);
    } else if (frame.kind === 'frame' || frame.kind === 'concealed') {
      // A DTMF placeholder plays as concealment of the previous audio would: as silence.
      this.deliver(frame.kind === 'concealed' ? frame.payload : this.wireSilence, true);
    }
  }

  /** Everything the jitter buffer holds goes to the model now (the stream is about to restart). */
  private drainReceive(): void {
    for (let guard = this.jitterBuffer.depthFrames(); guard > 0 && this.jitterBuffer.depthFrames() > 0; guard--) this.receiveFrame(Number.POSITIVE_INFINITY);
  }

  /** RFC 3550 loss of a source being replaced, kept so stats() never goes backwards. */
  private retireReceiveStats(): void {
    this.retired = { ...this.retired, rtpLost: this.retired.rtpLost + this.receiveStats.cumulativeLost };
  }

  /** The jitter buffer's counts plus those of the buffers it replaced: they never go backwards. */
  private receivedCounts(jb = this.jitterBuffer.stats()): ReceivedCounts {
    const r = this.retired;
    return {
      lost: jb.lost + r.lost,
      late: jb.late + r.late,
      duplicates: jb.duplicates + r.duplicates,
      discarded: jb.discarded + r.discarded,
      hurried: jb.hurried + r.hurried,
      concealed: jb.concealed + r.concealed,
      underruns: jb.underruns + r.underruns,
    };
  }

  /** Counts of a jitter buffer being replaced, kept so stats() and metrics never go backwards. */
  private retireJitterBuffer(): void {
    this.retired = { ...this.receivedCounts(), rtpLost: this.retired.rtpLost };
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
    const to = this.rtcpDestination();
    if (to === undefined) return;
    const latched = this.latched;
    // Fields written out rather than spread: a spread beside other fields takes V8's slow clone path.
    const report = latched === undefined || this.receiveStats.packetsReceived === 0 ? undefined : this.receiveStats.report();
    const sr = this.lastSenderReport;
    const block: RtcpReportBlock | undefined =
      latched === undefined || report === undefined
        ? undefined
        : {
            ssrc: latched.ssrc,
            extendedHighestSequence: report.extendedHighestSequence,
            cumulativeLost: report.cumulativeLost,
            fractionLost: report.fractionLost,
            jitter: report.jitter,
            lastSenderReport: sr?.ntpMiddle ?? 0,
            delaySinceLastSenderReport: sr ? Math.floor(((now - sr.atMs) / 1000) * 65536) : 0,
          };
    if (block) metrics.rtpJitter.observe(this.receiveStats.jitterMs / 1000);
    const data = serializeRtcpReport({
      ssrc: this.sendSsrc,
      cname: this.options.cname ?? `callgate@${this.localAddress}`,
      sender: this.sentSinceReport ? { wallClockMs: Date.now(), rtpTimestamp: this.rtpTimestampAt(now), packets: this.counts.packetsOut, octets: this.counts.bytesOut } : undefined,
      block,
    });
    this.sentSinceReport = false;
    this.sockets.sendRtcp(data, to);
    this.counts.rtcpOut++;
  }

  /**
   * Where reports go: where the latched source's own reports come from (symmetric RTCP, RFC 4961,
   * which is what gets through a NAT), else the port above the RTP port (RFC 3550 §11); none when
   * the RTP port is 65535 and the far end has sent no report.
   */
  private rtcpDestination(): RtpEndpoint | undefined {
    const remote = this.remote;
    if (remote === undefined) return undefined;
    const heard = this.rtcpRemote;
    if (heard !== undefined && heard.address === remote.address) return heard;
    return remote.port < 65535 ? { address: remote.address, port: remote.port + 1 } : undefined;
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

  /** Adds what changed since the last flush to the process metrics (plain sums; prom-client reads them when scraped). */
  private flushMetrics(): void {
    this.framesSinceFlush = 0;
    metrics.addLateness(this.pendingLateness, this.pendingLatenessSum);
    this.pendingLateness.fill(0);
    this.pendingLatenessSum = 0;
    const received = this.receivedCounts();
    const playout = this.playout.stats();
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
    for (const [reason, count] of Object.entries(this.dropped) as Array<[RtpSessionDropReason, number]>) {
      const published = this.flushedDrops[reason] ?? 0;
      if (count <= published) continue;
      metrics.addDrops(reason, count - published);
      this.flushedDrops[reason] = count;
    }
  }
}
