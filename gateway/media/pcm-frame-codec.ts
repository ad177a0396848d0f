/**
 * The wire codecs that code 20 ms frames of PCM through a library (Opus, G.722), behind one shape
 * for the transcoders; G.711 is a per-sample table and needs none.
 */
import type { AudioSampleRate } from './resampler.ts';
import type { WireCodecName } from './audio-format.ts';
import { G722Codec } from './g722-codec.ts';
import { OpusCodec } from './opus-codec.ts';

export interface PcmFrameCodec {
  /** One 20 ms frame of PCM at the codec's rate to one payload. */
  encode(frame: Int16Array): Buffer;
  /** One payload to PCM, or null when it does not decode. */
  decode(payload: Buffer): Int16Array | null;
}

/** A codec instance for `name` with PCM at `sampleRate`, or undefined for G.711. */
export function pcmFrameCodec(
  name: WireCodecName,
  sampleRate: AudioSampleRate,
): PcmFrameCodec | undefined {
  if (name === 'opus') return new OpusCodec({ sampleRate });
  if (name === 'G722') return new G722Codec();
  return undefined;
}
