/**
 * The receive path of an RtpSession: packets of the latched source through receive statistics
 * and the jitter buffer (or the DTMF receiver) to the model's format, one frame per tick, and the
 * media timeout. Knows nothing of sockets or latching: the session hands it accepted packets.
 *
 *   latched packet -> ReceiveStatistics -> JitterBuffer --receiveFrame()--> ReceiveTranscoder -> 'audio'
 *                                       -> DtmfReceiver ----------------------------------------> 'dtmf'
 */
import type { RtpConfig } from '../../config/schema.ts';
import { FRAME_MS, type ModelAudioFormat, type WireCodec } from './audio-format.ts';
import { DtmfReceiver } from './dtmf-receiver.ts';
import { concealG711Frame } from './g711-concealment.ts';
import { JitterBuffer, type JitterBufferStats, type JitterFrame } from './jitter-buffer.ts';
import * as metrics from './media-metrics.ts';
import { ReceiveStatistics } from './receive-statistics.ts';
import { ReceiveTranscoder } from './receive-transcoder.ts';
import type { RtpPacket } from './rtp-packet.ts';
import type { RtpSessionContext } from './rtp-session-context.ts';
import { rtpEvents } from './rtp-session-events.ts';

const EMPTY_PAYLOAD = Buffer.alloc(0);

/** Receive-side counts of the jitter buffer, summed over the buffers a session has had. */
export type ReceivedCounts = Pick<
  JitterBufferStats,
  'lost' | 'late' | 'duplicates' | 'discarded' | 'hurried' | 'concealed' | 'underruns'
>;

function newJitterBuffer(config: RtpConfig, codec: WireCodec): JitterBuffer {
  // Only G.711 is concealed; a lost Opus or G.722 frame is a 20 ms gap (jitter-buffer-g722.test.ts).
  const law = codec.name === 'PCMU' || codec.name === 'PCMA' ? codec.name : undefined;
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

export interface RtpReceivePathOptions {
  readonly context: RtpSessionContext;
  readonly config: RtpConfig;
  readonly codec: WireCodec;
  readonly model: ModelAudioFormat;
  /** 20 ms of silence in the wire codec: what a DTMF placeholder plays as. */
  readonly wireSilence: Buffer;
  /** When the session opened: the media timeout counts from here until the first RTP. */
  readonly openedAt: number;
}

export class RtpReceivePath {
  private readonly context: RtpSessionContext;
  private readonly config: RtpConfig;
  private jitterBuffer: JitterBuffer;
  private receiveStats: ReceiveStatistics;
  private transcoder: ReceiveTranscoder;
  private readonly dtmfReceiver = new DtmfReceiver();
  private wireSilence: Buffer;
  /** The jitter buffer's maximum depth in frames (rtp.jitterMaxMs). */
  private readonly maxReceiveFrames: number;
  private readonly openedAt: number;
  private lastRtpAt: number | undefined;
  private timedOut = false;
  /** Receive statistics of streams the session left behind (codec or SSRC changes). */
  private retired: ReceivedCounts & { rtpLost: number } = {
    rtpLost: 0,
    lost: 0,
    late: 0,
    duplicates: 0,
    discarded: 0,
    hurried: 0,
    concealed: 0,
    underruns: 0,
  };

  constructor(options: RtpReceivePathOptions) {
    this.context = options.context;
    this.config = options.config;
    this.jitterBuffer = newJitterBuffer(options.config, options.codec);
    this.maxReceiveFrames = Math.max(1, Math.floor(options.config.jitterMaxMs / FRAME_MS));
    this.receiveStats = new ReceiveStatistics(options.codec.clockRate);
    this.transcoder = new ReceiveTranscoder({ wire: options.codec, model: options.model });
    this.wireSilence = options.wireSilence;
    this.openedAt = options.openedAt;
  }

  /** The caller's codec is the model's: frames pass untouched. */
  get passthrough(): boolean {
    return this.transcoder.passthrough;
  }

  /** The stream's receive statistics (RTCP reports read them). */
  get statistics(): ReceiveStatistics {
    return this.receiveStats;
  }

  /** RFC 3550 loss over every stream the session received. */
  get cumulativeLost(): number {
    return this.receiveStats.cumulativeLost + this.retired.rtpLost;
  }

  jitterStats(): JitterBufferStats {
    return this.jitterBuffer.stats();
  }

  /** A packet of the latched source: statistics, then DTMF or the jitter buffer. */
  accept(packet: RtpPacket, now: number): void {
    const pt = packet.payloadType;
    const isAudio = pt === this.context.codec.payloadType;
    if (!this.receiveStats.update(packet.sequenceNumber, packet.timestamp, now, isAudio)) {
      this.context.drop('sequence-jump');
      return;
    }
    this.lastRtpAt = now;
    if (pt === this.context.telephoneEventPayloadType && !isAudio) {
      this.receiveDtmf(packet, now);
      return;
    }
    if (!isAudio) {
      // Comfort noise holds its sequence number, like an event packet, so it is not taken for loss.
      this.jitterBuffer.push(
        {
          sequenceNumber: packet.sequenceNumber,
          timestamp: packet.timestamp,
          payload: EMPTY_PAYLOAD,
          filler: true,
        },
        now,
      );
      return;
    }
    this.jitterBuffer.push(packet, now);
    // A stall of this process (a GC pause, a busy core) leaves the caller's packets queued in the
    // socket, and they arrive here all at once. Past the buffer's maximum depth the oldest frame
    // goes to the model now instead of being discarded: the model buffers audio itself, and caller
    // speech dropped because of our own stall would be words it never hears.
    if (this.jitterBuffer.depthFrames() > this.maxReceiveFrames) this.receiveFrame(now);
  }

  /**
   * A telephone-event packet of the caller's separate DTMF stream (its own SSRC): to the DTMF
   * receiver only, as its sequence numbers and timestamps are not the audio stream's.
   */
  acceptSideEvent(packet: RtpPacket, now: number): void {
    this.lastRtpAt = now;
    this.handleDtmf(packet);
  }

  /** One frame (and any surplus the buffer sheds) to the model. */
  receiveFrame(nowMs: number): void {
    this.deliverFrame(this.jitterBuffer.pop(nowMs));
    const surplus = this.jitterBuffer.popSurplus();
    if (surplus !== undefined) this.deliverFrame(surplus);
  }

  /**
   * The caller's stream has a new SSRC: what is buffered of the old one goes to the model, then
   * the jitter buffer, statistics and DTMF start over, as the new stream's sequence numbers and
   * timestamps have nothing to do with the old ones.
   */
  startNewStream(): void {
    this.drain();
    this.retireReceiveStats();
    this.jitterBuffer.reset();
    this.dtmfReceiver.reset();
    this.receiveStats = new ReceiveStatistics(this.context.codec.clockRate);
  }

  /** A re-INVITE changed the codec: buffered caller audio of the old one is delivered, then the stream starts over. */
  changeCodec(codec: WireCodec, model: ModelAudioFormat): void {
    this.drain();
    this.retireReceiveStats();
    this.retired = { ...this.receivedCounts(), rtpLost: this.retired.rtpLost };
    this.jitterBuffer = newJitterBuffer(this.config, codec);
    this.receiveStats = new ReceiveStatistics(codec.clockRate);
    this.transcoder = new ReceiveTranscoder({ wire: codec, model });
    this.dtmfReceiver.reset();
  }

  /** The wire codec's silence changed (a codec change on the send side). */
  setWireSilence(silence: Buffer): void {
    this.wireSilence = silence;
  }

  /** The jitter buffer's counts plus those of the buffers it replaced: they never go backwards. */
  receivedCounts(jb = this.jitterBuffer.stats()): ReceivedCounts {
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

  /** A hold ended: the media timeout counts from now. */
  resumed(now: number): void {
    this.lastRtpAt = now;
  }

  /** Emits `media-timeout` once when no RTP came for rtp.mediaTimeoutMs (never during a hold). */
  checkMediaTimeout(now: number, onHold: boolean): void {
    if (onHold || this.timedOut) return;
    const since = this.lastRtpAt ?? this.openedAt;
    const silentMs = now - since;
    if (silentMs < this.config.mediaTimeoutMs) return;
    this.timedOut = true;
    metrics.mediaTimeouts.inc();
    this.context.logger.info('media timeout', { silent_ms: Math.round(silentMs) });
    this.context.emit(
      rtpEvents.mediaTimeout(this.lastRtpAt === undefined ? 'no-rtp-ever' : 'no-rtp', silentMs),
    );
  }

  private receiveDtmf(packet: RtpPacket, now: number): void {
    // The event packet takes a sequence number in the audio stream: hold its place.
    this.jitterBuffer.push(
      {
        sequenceNumber: packet.sequenceNumber,
        timestamp: packet.timestamp,
        payload: EMPTY_PAYLOAD,
        filler: true,
      },
      now,
    );
    this.handleDtmf(packet);
  }

  private handleDtmf(packet: RtpPacket): void {
    const result = this.dtmfReceiver.receive(packet);
    const clockRate = this.context.codec.clockRate;
    if (result.kind === 'digit') {
      this.context.counts.dtmfIn++;
      metrics.dtmfEvents.inc({ direction: 'in', source: 'rtp' });
      this.context.emit(rtpEvents.dtmf(result.digit, 'rtp'));
      if (result.endedDuration !== undefined)
        this.context.emit(
          rtpEvents.dtmfEnd(result.digit, (result.endedDuration * 1000) / clockRate, 'rtp'),
        );
    } else if (result.kind === 'end') {
      this.context.emit(
        rtpEvents.dtmfEnd(result.digit, (result.duration * 1000) / clockRate, 'rtp'),
      );
    }
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
  private drain(): void {
    for (
      let guard = this.jitterBuffer.depthFrames();
      guard > 0 && this.jitterBuffer.depthFrames() > 0;
      guard--
    )
      this.receiveFrame(Number.POSITIVE_INFINITY);
  }

  /** RFC 3550 loss of a source being replaced, kept so stats() never goes backwards. */
  private retireReceiveStats(): void {
    this.retired = {
      ...this.retired,
      rtpLost: this.retired.rtpLost + this.receiveStats.cumulativeLost,
    };
  }

  private deliver(payload: Buffer, concealed: boolean): void {
    const audio = this.transcoder.convert(payload);
    if (audio === null) {
      this.context.drop('undecodable');
      return;
    }
    if (audio.length > 0) this.context.emit(rtpEvents.audio(audio, concealed));
  }
}
