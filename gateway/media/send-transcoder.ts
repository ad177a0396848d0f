/**
 * Model audio to 20 ms RTP payloads. The model streams audio in chunks of any size; whole frames
 * come out as soon as they are complete and the remainder waits for the next chunk or `flush()`.
 * A PCMU model on a PCMU call (PCMA on PCMA) is only sliced, never transcoded, and the frames
 * are views into the pushed buffers: `push()` takes ownership of what it is given.
 */
import { FRAME_MS, codecPcmRate, type ModelAudioFormat, type WireCodec } from './audio-format.ts';
import { ALAW_SILENCE, ULAW_SILENCE, encodeAlaw, encodeUlaw } from './g711.ts';
import { g722SilenceFrame } from './g722-codec.ts';
import { pcmFrameCodec, type PcmFrameCodec } from './pcm-frame-codec.ts';
import { modelBytesToPcm, modelSampleRate } from './pcm.ts';
import { Resampler } from './resampler.ts';

const EMPTY = Buffer.alloc(0);

export interface SendTranscoderOptions {
  readonly wire: WireCodec;
  readonly model: ModelAudioFormat;
}

export class SendTranscoder {
  readonly passthrough: boolean;
  /** PCM samples (at the wire rate) or G.711 bytes (passthrough) in one frame. */
  readonly frameSamples: number;
  private readonly wire: WireCodec;
  private readonly model: ModelAudioFormat;
  private readonly resampler: Resampler;
  /** Opus or G.722; G.711 is encoded by table. */
  private readonly codec: PcmFrameCodec | undefined;
  private pendingBytes: Buffer = EMPTY;
  private pendingSamples: Int16Array;
  private pendingSampleCount = 0;
  /** A trailing odd byte of PCM16 input, kept for the next chunk. */
  private oddByte: Buffer = Buffer.alloc(0);

  constructor(options: SendTranscoderOptions) {
    this.wire = options.wire;
    this.model = options.model;
    this.passthrough =
      (options.wire.name === 'PCMU' && options.model.encoding === 'pcmu') ||
      (options.wire.name === 'PCMA' && options.model.encoding === 'pcma');
    // libopus converts to the model's rate itself; G.711 (8 kHz) and G.722 (16 kHz) may need resampling.
    const wireRate = codecPcmRate(options.wire.name, modelSampleRate(options.model));
    this.frameSamples = (wireRate * FRAME_MS) / 1000;
    this.resampler = new Resampler({ fromRate: modelSampleRate(options.model), toRate: wireRate });
    this.codec = pcmFrameCodec(options.wire.name, wireRate);
    this.pendingSamples = new Int16Array(this.frameSamples * 4);
  }

  /** A 20 ms payload of silence in the wire codec. */
  silenceFrame(): Buffer {
    if (this.wire.name === 'G722') return g722SilenceFrame();
    if (this.codec) return this.codec.encode(new Int16Array(this.frameSamples));
    return Buffer.alloc(this.frameSamples, this.wire.name === 'PCMU' ? ULAW_SILENCE : ALAW_SILENCE);
  }

  /** Appends model audio; returns the frames it completes. */
  push(audio: Buffer): Buffer[] {
    if (this.passthrough) return this.sliceBytes(audio);
    let bytes = audio;
    if (this.model.encoding === 'pcm16') {
      if (this.oddByte.length > 0) bytes = Buffer.concat([this.oddByte, audio]);
      this.oddByte =
        bytes.length % 2 === 1 ? Buffer.from(bytes.subarray(bytes.length - 1)) : Buffer.alloc(0);
      if (this.oddByte.length > 0) bytes = bytes.subarray(0, bytes.length - 1);
    }
    return this.pushSamples(this.resampler.process(modelBytesToPcm(this.model, bytes)));
  }

  /**
   * End of a model output item: what the resampler still holds back, and what remains, as whole
   * frames padded with silence. Nothing of this item is left to start the next one.
   */
  flush(): Buffer[] {
    this.oddByte = Buffer.alloc(0);
    if (this.passthrough) {
      if (this.pendingBytes.length === 0) return [];
      const silence = this.wire.name === 'PCMU' ? ULAW_SILENCE : ALAW_SILENCE;
      const frame = Buffer.alloc(this.frameSamples, silence);
      this.pendingBytes.copy(frame);
      this.pendingBytes = EMPTY;
      return [frame];
    }
    const frames = this.pushSamples(this.resampler.drain());
    if (this.pendingSampleCount === 0) return frames;
    this.pendingSamples.fill(0, this.pendingSampleCount, this.frameSamples);
    this.pendingSampleCount = 0;
    frames.push(this.encode(this.pendingSamples.subarray(0, this.frameSamples)));
    return frames;
  }

  /** Drops buffered audio (barge-in): the next push starts a fresh stream. */
  reset(): void {
    this.pendingBytes = EMPTY;
    this.pendingSampleCount = 0;
    this.oddByte = Buffer.alloc(0);
    this.resampler.reset();
  }

  private sliceBytes(audio: Buffer): Buffer[] {
    // A chunk of exactly one frame (what a passthrough echo or a 20 ms model delta is) is the frame.
    if (this.pendingBytes.length === 0 && audio.length === this.frameSamples) return [audio];
    const bytes = this.pendingBytes.length > 0 ? Buffer.concat([this.pendingBytes, audio]) : audio;
    const frames: Buffer[] = [];
    let offset = 0;
    while (bytes.length - offset >= this.frameSamples) {
      frames.push(bytes.subarray(offset, offset + this.frameSamples));
      offset += this.frameSamples;
    }
    this.pendingBytes = offset === bytes.length ? EMPTY : bytes.subarray(offset);
    return frames;
  }

  private pushSamples(samples: Int16Array): Buffer[] {
    const frames: Buffer[] = [];
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(this.frameSamples - this.pendingSampleCount, samples.length - offset);
      this.pendingSamples.set(samples.subarray(offset, offset + take), this.pendingSampleCount);
      this.pendingSampleCount += take;
      offset += take;
      if (this.pendingSampleCount === this.frameSamples) {
        frames.push(this.encode(this.pendingSamples.subarray(0, this.frameSamples)));
        this.pendingSampleCount = 0;
      }
    }
    return frames;
  }

  private encode(frame: Int16Array): Buffer {
    if (this.codec) return this.codec.encode(frame);
    return this.wire.name === 'PCMU' ? encodeUlaw(frame) : encodeAlaw(frame);
  }
}
