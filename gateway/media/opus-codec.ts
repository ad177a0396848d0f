/**
 * Opus for RTP (RFC 7587) through libopus (@discordjs/opus): mono, 20 ms frames. The RTP clock is
 * always 48 kHz, but libopus encodes from and decodes to 8, 16, 24 or 48 kHz PCM itself, in C, so
 * the codec works at the model's rate and the JavaScript resampler stays out of the Opus path. A corrupt
 * packet from the network decodes to null (the caller conceals or drops it); an encode failure is
 * a CallgateError, since the input is ours.
 */
import opus from '@discordjs/opus';
import { CallgateError } from '../../config/errors.ts';
import type { AudioSampleRate } from './resampler.ts';

// @discordjs/opus is CommonJS without named-export hints: Node's ESM loader sees only `default`.
const { OpusEncoder } = opus;
type OpusEncoder = InstanceType<typeof OpusEncoder>;

/** 20 ms at 48 kHz. */
export const OPUS_FRAME_SAMPLES = 960;
/** Wideband speech is transparent at 32 kb/s; more only costs carrier bandwidth. */
const DEFAULT_BITRATE = 32_000;

/** libopus OPUS_SET_COMPLEXITY_REQUEST. */
const OPUS_SET_COMPLEXITY = 4010;
/**
 * Encoder complexity 0-10. libopus defaults to 10, which costs several times more CPU per frame
 * than 5 for no audible gain on narrowband telephone speech; 5 is what telephony stacks use.
 */
const DEFAULT_COMPLEXITY = 5;

export interface OpusCodecOptions {
  /** Rate of the PCM going in and out (not the RTP clock); 48 kHz by default. */
  readonly sampleRate?: AudioSampleRate;
  readonly bitrate?: number;
  readonly complexity?: number;
}

export class OpusCodec {
  readonly sampleRate: AudioSampleRate;
  /** PCM samples in one 20 ms frame at `sampleRate`. */
  readonly frameSamples: number;
  private readonly opus: OpusEncoder;

  constructor(options: OpusCodecOptions = {}) {
    this.sampleRate = options.sampleRate ?? 48000;
    this.frameSamples = this.sampleRate / 50;
    this.opus = new OpusEncoder(this.sampleRate, 1);
    this.opus.setBitrate(options.bitrate ?? DEFAULT_BITRATE);
    this.opus.applyEncoderCTL(OPUS_SET_COMPLEXITY, options.complexity ?? DEFAULT_COMPLEXITY);
  }

  /** Encodes exactly one 20 ms frame of PCM at `sampleRate`. */
  encode(frame: Int16Array): Buffer {
    if (frame.length !== this.frameSamples) {
      throw new CallgateError('CALLGATE_ERR_MEDIA_CODEC', {
        codec: 'opus',
        reason: `frame of ${frame.length} samples, expected ${this.frameSamples}`,
      });
    }
    try {
      return this.opus.encode(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength));
    } catch (error) {
      throw new CallgateError(
        'CALLGATE_ERR_MEDIA_CODEC',
        { codec: 'opus', reason: String(error) },
        { cause: error },
      );
    }
  }

  /** Decodes one packet to PCM at `sampleRate`, or null when libopus rejects it. */
  decode(packet: Buffer): Int16Array | null {
    if (packet.length === 0) return null;
    let pcm: Buffer;
    try {
      pcm = this.opus.decode(packet);
    } catch {
      return null;
    }
    const samples = pcm.length >> 1;
    if (pcm.byteOffset % 2 === 0) return new Int16Array(pcm.buffer, pcm.byteOffset, samples);
    const copy = new Int16Array(samples);
    for (let i = 0; i < samples; i++) copy[i] = pcm.readInt16LE(2 * i);
    return copy;
  }
}
