/**
 * Opus for RTP (RFC 7587) through libopus (@discordjs/opus): mono, 48 kHz, 20 ms frames. A corrupt
 * packet from the network decodes to null (the caller conceals or drops it); an encode failure is
 * a CallgateError, since the input is ours.
 */
import opus from '@discordjs/opus';

// @discordjs/opus is CommonJS without named-export hints: Node's ESM loader sees only `default`.
const { OpusEncoder } = opus;
type OpusEncoder = InstanceType<typeof OpusEncoder>;
import { CallgateError } from '../../config/errors.ts';

export const OPUS_SAMPLE_RATE = 48000;
/** 20 ms at 48 kHz. */
export const OPUS_FRAME_SAMPLES = 960;
/** Wideband speech is transparent at 32 kb/s; more only costs carrier bandwidth. */
const DEFAULT_BITRATE = 32_000;

export interface OpusCodecOptions {
  readonly bitrate?: number;
}

export class OpusCodec {
  private readonly opus: OpusEncoder;

  constructor(options: OpusCodecOptions = {}) {
    this.opus = new OpusEncoder(OPUS_SAMPLE_RATE, 1);
    this.opus.setBitrate(options.bitrate ?? DEFAULT_BITRATE);
  }

  /** Encodes exactly one 20 ms frame of 48 kHz PCM. */
  encode(frame: Int16Array): Buffer {
    if (frame.length !== OPUS_FRAME_SAMPLES) {
      throw new CallgateError('CALLGATE_ERR_MEDIA_CODEC', { codec: 'opus', reason: `frame of ${frame.length} samples, expected ${OPUS_FRAME_SAMPLES}` });
    }
    try {
      return this.opus.encode(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength));
    } catch (error) {
      throw new CallgateError('CALLGATE_ERR_MEDIA_CODEC', { codec: 'opus', reason: String(error) }, { cause: error });
    }
  }

  /** Decodes one packet to 48 kHz PCM, or null when libopus rejects it. */
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
