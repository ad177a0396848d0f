/** Conversions between model audio bytes and PCM samples, shared by both transcoding directions. */
import type { ModelAudioFormat } from './audio-format.ts';
import { decodeAlaw, decodeUlaw, encodeAlaw, encodeUlaw } from './g711.ts';
import type { AudioSampleRate } from './resampler.ts';

export function modelSampleRate(format: ModelAudioFormat): AudioSampleRate {
  return format.encoding === 'pcm16' ? format.sampleRate : 8000;
}

/** Little-endian 16-bit bytes to samples (copies: the bytes may sit at an odd offset). */
export function pcm16FromBytes(bytes: Buffer): Int16Array {
  const out = new Int16Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readInt16LE(2 * i);
  return out;
}

export function pcm16ToBytes(samples: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i] as number, 2 * i);
  return out;
}

export function modelBytesToPcm(format: ModelAudioFormat, bytes: Buffer): Int16Array {
  if (format.encoding === 'pcmu') return decodeUlaw(bytes);
  if (format.encoding === 'pcma') return decodeAlaw(bytes);
  return pcm16FromBytes(bytes);
}

export function pcmToModelBytes(format: ModelAudioFormat, samples: Int16Array): Buffer {
  if (format.encoding === 'pcmu') return encodeUlaw(samples);
  if (format.encoding === 'pcma') return encodeAlaw(samples);
  return pcm16ToBytes(samples);
}
