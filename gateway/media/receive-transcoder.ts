/**
 * Caller audio from RTP payloads to the model's format. PCMU to a PCMU model (and PCMA to PCMA)
 * passes the payload through untouched: no decode, no resample, no added delay.
 */
import type { ModelAudioFormat, WireCodec } from './audio-format.ts';
import { decodeAlaw, decodeUlaw } from './g711.ts';
import { OpusCodec } from './opus-codec.ts';
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
  private readonly opus: OpusCodec | undefined;

  constructor(options: ReceiveTranscoderOptions) {
    this.wire = options.wire;
    this.model = options.model;
    this.passthrough =
      (options.wire.name === 'PCMU' && options.model.encoding === 'pcmu') ||
      (options.wire.name === 'PCMA' && options.model.encoding === 'pcma');
    // libopus converts to the model's rate itself; only G.711 (8 kHz) may need resampling.
    const wireRate = options.wire.name === 'opus' ? modelSampleRate(options.model) : 8000;
    this.resampler = new Resampler({ fromRate: wireRate, toRate: modelSampleRate(options.model) });
    this.opus = options.wire.name === 'opus' ? new OpusCodec({ sampleRate: wireRate }) : undefined;
  }

  /** One RTP payload to model audio; null when the payload does not decode (counted by the caller). */
  convert(payload: Buffer): Buffer | null {
    if (this.passthrough) return payload;
    let pcm: Int16Array | null;
    if (this.opus) pcm = this.opus.decode(payload);
    else pcm = this.wire.name === 'PCMU' ? decodeUlaw(payload) : decodeAlaw(payload);
    if (pcm === null) return null;
    return pcmToModelBytes(this.model, this.resampler.process(pcm));
  }
}
