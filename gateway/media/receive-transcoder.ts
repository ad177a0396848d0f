/**
 * Caller audio from RTP payloads to the model's format. PCMU to a PCMU model (and PCMA to PCMA)
 * passes the payload through untouched: no decode, no resample, no added delay.
 */
import { codecPcmRate, type ModelAudioFormat, type WireCodec } from './audio-format.ts';
import { decodeAlaw, decodeUlaw } from './g711.ts';
import { pcmFrameCodec, type PcmFrameCodec } from './pcm-frame-codec.ts';
import { modelSampleRate, pcmToModelBytes } from './pcm.ts';
import { Resampler } from './resampler.ts';

export interface ReceiveTranscoderOptions {
  readonly wire: WireCodec;
  readonly model: ModelAudioFormat;
}

export class ReceiveTranscoder {
  readonly passthrough: boolean;
  private readonly wire: WireCodec;
  private readonly model: ModelAudioFormat;
  private readonly resampler: Resampler;
  /** Opus or G.722; G.711 is decoded by table. */
  private readonly codec: PcmFrameCodec | undefined;

  constructor(options: ReceiveTranscoderOptions) {
    this.wire = options.wire;
    this.model = options.model;
    this.passthrough =
      (options.wire.name === 'PCMU' && options.model.encoding === 'pcmu') ||
      (options.wire.name === 'PCMA' && options.model.encoding === 'pcma');
    // libopus converts to the model's rate itself; G.711 (8 kHz) and G.722 (16 kHz) may need resampling.
    const wireRate = codecPcmRate(options.wire.name, modelSampleRate(options.model));
    this.resampler = new Resampler({ fromRate: wireRate, toRate: modelSampleRate(options.model) });
    this.codec = pcmFrameCodec(options.wire.name, wireRate);
  }

  /** One RTP payload to model audio; null when the payload does not decode (counted by the caller). */
  convert(payload: Buffer): Buffer | null {
    if (this.passthrough) return payload;
    let pcm: Int16Array | null;
    if (this.codec) pcm = this.codec.decode(payload);
    else pcm = this.wire.name === 'PCMU' ? decodeUlaw(payload) : decodeAlaw(payload);
    if (pcm === null) return null;
    return pcmToModelBytes(this.model, this.resampler.process(pcm));
  }
}
