/**
 * Media test modes a route (a tenant's numbers) can select instead of an agent, as PBXs offer an
 * echo-test extension: what a caller, a carrier or a test suite uses to check the media path
 * (NAT, codecs, DTMF, timing) without a model.
 *
 * - `echo` plays back what it receives: each 20 ms frame the model would have heard goes back
 *   through the paced playout (PCMU in, the same bytes out), and each key press goes back as
 *   RFC 4733 events of the length it was held.
 * - `record` keeps what it received: at hang-up, `<recordDir>/<call id>.wav` holds the caller's
 *   audio as the model would have heard it (G.711 as is, Opus decoded to 48 kHz PCM) and
 *   `<call id>.json` the digits with their durations, the latching events and the call's media
 *   statistics.
 *
 * The call side is structural (what of an inbound call this needs), so the media layer does not
 * depend on the signaling layer; an `InboundCall` is one.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RtpConfig } from '../../config/schema.ts';
import type { Logger } from '../../config/log.ts';
import { wireCodec, type ModelAudioFormat, type WireCodecName } from './audio-format.ts';
import type { MediaTimer } from './media-timer.ts';
import type { PlayoutScheduler } from './playout-scheduler.ts';
import type { RtpPortAllocator } from './rtp-port-allocator.ts';
import { RtpSession } from './rtp-session.ts';
import type { RtpEndpoint, RtpSessionEvent } from './rtp-session-events.ts';
import type { RtpSessionStats } from './rtp-session-stats.ts';
import type { SrtpKeys } from './srtp-transform.ts';
import { isDtmfDigit } from './telephone-event.ts';
import { wavFile } from './wav-file.ts';

export type MediaTestMode = 'echo' | 'record';

/** The echo is one endless model item. */
const ECHO_ITEM = 'echo';

/** The media of an answer or re-INVITE, as signaling reports it. */
export interface MediaTestMedia {
  readonly codec: WireCodecName;
  readonly payloadType: number;
  readonly telephoneEvent?: { readonly payloadType: number };
  readonly remote: RtpEndpoint;
  readonly held: boolean;
  /** SRTP keys when the stream is RTP/SAVP. */
  readonly srtp?: SrtpKeys;
}

export interface MediaTestDialogEvent {
  readonly type: string;
  readonly media?: MediaTestMedia;
  readonly digit?: string;
  readonly durationMs?: number;
  /** Where a re-INVITE came from: named for the call's media, as the INVITE's source is. */
  readonly source?: string;
}

export interface MediaTestCall {
  readonly callId: string;
  /** Where the INVITE came from; its address may send the call's media (media-source-policy.ts). */
  readonly source?: { readonly address: string };
  readonly tenant?: { readonly media: { readonly allowFrom: readonly string[] } };
  accept(options: {
    readonly local: RtpEndpoint;
  }):
    | { readonly ok: true; readonly media: MediaTestMedia }
    | { readonly ok: false; readonly status: number; readonly reason: string };
  reject(status: number, reason?: string): void;
  readonly dialog: {
    on(listener: (event: MediaTestDialogEvent) => void): () => void;
    hangup(): Promise<void>;
  };
}

export interface MediaTestEndpointOptions {
  readonly mode: MediaTestMode;
  /** Where `record` writes its files. */
  readonly recordDir: string;
  readonly config: RtpConfig;
  readonly ports: RtpPortAllocator;
  readonly scheduler: PlayoutScheduler;
  readonly timer: MediaTimer;
  readonly logger: Logger;
}

export interface MediaTestDigit {
  readonly digit: string;
  readonly source: string;
  /** Milliseconds since the call was answered. */
  readonly atMs: number;
  /** How long the key was held, once its release arrived. */
  durationMs?: number;
}

/** What `record` writes beside the WAV file. */
export interface MediaTestRecording {
  readonly callId: string;
  readonly mode: MediaTestMode;
  readonly codec: WireCodecName;
  readonly audio: {
    readonly file: string;
    readonly encoding: ModelAudioFormat['encoding'];
    readonly sampleRate: number;
    readonly frames: number;
    readonly concealedFrames: number;
  };
  readonly digits: readonly MediaTestDigit[];
  readonly latches: ReadonlyArray<{
    readonly address: string;
    readonly port: number;
    readonly ssrc: number;
  }>;
  readonly ssrcChanges: ReadonlyArray<{ readonly previousSsrc: number; readonly ssrc: number }>;
  readonly stats: RtpSessionStats | undefined;
}

/**
 * G.711 passes through as it came (nothing to decode); G.722 is decoded at its own 16 kHz, Opus
 * at its full rate: nothing is resampled, so echo and recording keep the caller's bandwidth.
 */
function modelFormatFor(codec: WireCodecName): ModelAudioFormat {
  if (codec === 'PCMU') return { encoding: 'pcmu' };
  if (codec === 'PCMA') return { encoding: 'pcma' };
  if (codec === 'G722') return { encoding: 'pcm16', sampleRate: 16000 };
  return { encoding: 'pcm16', sampleRate: 48000 };
}

/**
 * Recorded frames are joined into a buffer of their own every this many (a second of 20 ms frames).
 * A caller frame is a view of the jitter buffer's store, whose 8 KB chunks are shared by all calls
 * (payload-store.ts): a recording that kept every frame of a long call would keep a chunk per frame.
 */
const RECORD_JOIN_FRAMES = 50;

export class MediaTestEndpoint {
  private readonly call: MediaTestCall;
  private readonly options: MediaTestEndpointOptions;
  private readonly session: RtpSession;
  private readonly startedAt: number;
  private codec: WireCodecName = 'PCMU';
  private model: ModelAudioFormat = { encoding: 'pcmu' };
  /** Recorded audio, joined about once a second (see RECORD_JOIN_FRAMES), and the frames not joined yet. */
  private readonly audio: Buffer[] = [];
  private pendingAudio: Buffer[] = [];
  private recordedFrames = 0;
  private concealedFrames = 0;
  private readonly digits: MediaTestDigit[] = [];
  private readonly latches: Array<{ address: string; port: number; ssrc: number }> = [];
  private readonly ssrcChanges: Array<{ previousSsrc: number; ssrc: number }> = [];
  private finished: Promise<void> | undefined;

  private constructor(call: MediaTestCall, options: MediaTestEndpointOptions, session: RtpSession) {
    this.call = call;
    this.options = options;
    this.session = session;
    this.startedAt = options.timer.now();
  }

  /**
   * Answers the call in the given mode and runs it until either side hangs up. Resolves with the
   * endpoint once answered, or undefined when the call was rejected (no media ports, no common codec).
   */
  static async answer(
    call: MediaTestCall,
    options: MediaTestEndpointOptions,
  ): Promise<MediaTestEndpoint | undefined> {
    let session: RtpSession;
    try {
      // The answer needs the port before the codec is known: open with PCMU, switch once answered.
      session = await RtpSession.open({
        config: options.config,
        ports: options.ports,
        scheduler: options.scheduler,
        timer: options.timer,
        codec: wireCodec('PCMU'),
        model: { encoding: 'pcmu' },
        sources: {
          ...(call.source !== undefined && { signaling: call.source.address }),
          ...(call.tenant !== undefined && { allowFrom: call.tenant.media.allowFrom }),
        },
        logger: options.logger,
      });
    } catch (error) {
      options.logger.error('media test call: no media', { error, sip_call_id: call.callId });
      call.reject(503, 'Service Unavailable');
      return undefined;
    }
    const accepted = call.accept({
      local: { address: session.localAddress, port: session.localPort },
    });
    if (!accepted.ok) {
      await session.close();
      return undefined;
    }
    const endpoint = new MediaTestEndpoint(call, options, session);
    endpoint.applyMedia(accepted.media);
    session.on((event) => endpoint.onMedia(event));
    call.dialog.on((event) => endpoint.onDialog(event));
    options.logger.info('media test call answered', {
      mode: options.mode,
      codec: accepted.media.codec,
      rtp_port: session.localPort,
      sip_call_id: call.callId,
    });
    return endpoint;
  }

  get rtpSession(): RtpSession {
    return this.session;
  }

  /** Ends the call from callgate's side (BYE) and releases its media. */
  async hangup(): Promise<void> {
    await this.call.dialog.hangup().catch(() => undefined);
    await this.finish();
  }

  private applyMedia(media: MediaTestMedia, signaling?: string): void {
    this.codec = media.codec;
    this.model = modelFormatFor(media.codec);
    this.session.setCodec({
      codec: wireCodec(media.codec, media.payloadType),
      model: this.model,
      ...(media.telephoneEvent !== undefined && {
        telephoneEventPayloadType: media.telephoneEvent.payloadType,
      }),
    });
    this.session.setRemote(media.remote, signaling);
    this.session.setSrtp(media.srtp);
    this.session.setHold(media.held);
  }

  private onDialog(event: MediaTestDialogEvent): void {
    // A re-INVITE changes the media; so does the ACK of a call whose INVITE had no offer (the
    // answer was only provisional until the caller's answer came with the ACK).
    if ((event.type === 'reinvite' || event.type === 'ack') && event.media !== undefined) {
      this.applyMedia(event.media, event.source);
    } else if (event.type === 'dtmf' && event.digit !== undefined && isDtmfDigit(event.digit)) {
      this.session.injectDigit(event.digit, event.durationMs);
    } else if (event.type === 'ended') {
      void this.finish();
    }
  }

  private onMedia(event: RtpSessionEvent): void {
    switch (event.type) {
      case 'audio':
        if (this.options.mode === 'echo') this.session.play(ECHO_ITEM, event.audio);
        else this.record(event.audio);
        if (event.concealed) this.concealedFrames++;
        return;
      case 'dtmf':
        this.digits.push({
          digit: event.digit,
          source: event.source,
          atMs: Math.round(this.options.timer.now() - this.startedAt),
        });
        return;
      case 'dtmf-end': {
        const digit = this.digits.findLast(
          (d) => d.digit === event.digit && d.durationMs === undefined,
        );
        if (digit !== undefined) digit.durationMs = event.durationMs;
        if (this.options.mode === 'echo') this.session.sendDigit(event.digit, event.durationMs);
        return;
      }
      case 'remote-latched':
        this.latches.push({
          address: event.remote.address,
          port: event.remote.port,
          ssrc: event.ssrc,
        });
        return;
      case 'ssrc-changed':
        this.ssrcChanges.push({ previousSsrc: event.previousSsrc, ssrc: event.ssrc });
        return;
      case 'media-timeout':
        this.options.logger.info('media test call: no media, hanging up', {
          sip_call_id: this.call.callId,
          reason: event.reason,
        });
        void this.hangup();
        return;
      default:
        return;
    }
  }

  private record(frame: Buffer): void {
    this.recordedFrames++;
    this.pendingAudio.push(frame);
    if (this.pendingAudio.length >= RECORD_JOIN_FRAMES) this.joinPendingAudio();
  }

  private joinPendingAudio(): void {
    if (this.pendingAudio.length === 0) return;
    this.audio.push(Buffer.concat(this.pendingAudio));
    this.pendingAudio = [];
  }

  private finish(): Promise<void> {
    this.finished ??= (async () => {
      let stats: RtpSessionStats | undefined;
      this.session.on((event) => {
        if (event.type === 'closed') stats = event.stats;
      });
      await this.session.close();
      if (this.options.mode === 'record') await this.writeRecording(stats);
    })().catch((error: unknown) =>
      this.options.logger.error('media test call: recording not written', {
        error,
        sip_call_id: this.call.callId,
      }),
    );
    return this.finished;
  }

  private async writeRecording(stats: RtpSessionStats | undefined): Promise<void> {
    const name = this.call.callId.replace(/[^A-Za-z0-9._-]/g, '_');
    await mkdir(this.options.recordDir, { recursive: true });
    const sampleRate = this.model.encoding === 'pcm16' ? this.model.sampleRate : 8000;
    this.joinPendingAudio();
    const audio = Buffer.concat(this.audio);
    const wav = `${name}.wav`;
    const recording: MediaTestRecording = {
      callId: this.call.callId,
      mode: this.options.mode,
      codec: this.codec,
      audio: {
        file: wav,
        encoding: this.model.encoding,
        sampleRate,
        frames: this.recordedFrames,
        concealedFrames: this.concealedFrames,
      },
      digits: this.digits,
      latches: this.latches,
      ssrcChanges: this.ssrcChanges,
      stats,
    };
    await writeFile(
      join(this.options.recordDir, wav),
      wavFile(this.model.encoding, sampleRate, audio),
    );
    await writeFile(
      join(this.options.recordDir, `${name}.json`),
      `${JSON.stringify(recording, null, 2)}\n`,
    );
    this.options.logger.info('media test call recorded', {
      sip_call_id: this.call.callId,
      file: join(this.options.recordDir, wav),
      frames: this.recordedFrames,
      digits: this.digits.length,
    });
  }
}
