/**
 * What audio looks like on each side of the media layer: the RTP codec negotiated with the caller
 * (from SDP) and the format the realtime model speaks. Types only.
 */
import type { AudioSampleRate } from './resampler.ts';

export type WireCodecName = 'PCMU' | 'PCMA' | 'G722' | 'opus';

export interface WireCodec {
  readonly name: WireCodecName;
  readonly payloadType: number;
  /** RTP timestamp clock: 8000 for G.711 and G.722 (RFC 3551 §4.5.2), always 48000 for Opus (RFC 7587). */
  readonly clockRate: number;
}

/** Model-side audio: G.711 bytes or 16-bit little-endian mono PCM at a given rate. */
export type ModelAudioFormat =
  | { readonly encoding: 'pcmu' }
  | { readonly encoding: 'pcma' }
  | { readonly encoding: 'pcm16'; readonly sampleRate: AudioSampleRate };

/** Every RTP frame is 20 ms: the packetization SIP carriers and the realtime models agree on. */
export const FRAME_MS = 20;

export const PCMU: WireCodec = { name: 'PCMU', payloadType: 0, clockRate: 8000 };
export const PCMA: WireCodec = { name: 'PCMA', payloadType: 8, clockRate: 8000 };
/** 16 kHz audio on an 8 kHz RTP clock, static payload type 9 (RFC 3551 §4.5.2). */
export const G722: WireCodec = { name: 'G722', payloadType: 9, clockRate: 8000 };
/** The RTP clock rate of Opus, whatever the audio bandwidth (RFC 7587 §4.1). */
const OPUS_RTP_CLOCK_RATE = 48000;

export function wireCodec(name: WireCodecName, payloadType?: number): WireCodec {
  if (name === 'PCMU') return { ...PCMU, payloadType: payloadType ?? PCMU.payloadType };
  if (name === 'PCMA') return { ...PCMA, payloadType: payloadType ?? PCMA.payloadType };
  if (name === 'G722') return { ...G722, payloadType: payloadType ?? G722.payloadType };
  return { name, payloadType: payloadType ?? 111, clockRate: OPUS_RTP_CLOCK_RATE };
}

/** RTP timestamp units in one 20 ms frame. */
export function samplesPerFrame(codec: WireCodec): number {
  return (codec.clockRate * FRAME_MS) / 1000;
}

/**
 * The rate of the PCM a codec's encoder takes and its decoder gives: 8 kHz for G.711, 16 kHz for
 * G.722; Opus converts inside libopus, so it works at whatever rate its neighbour needs.
 */
export function codecPcmRate(codec: WireCodecName, neighbour: AudioSampleRate): AudioSampleRate {
  if (codec === 'opus') return neighbour;
  return codec === 'G722' ? 16000 : 8000;
}

/**
 * A PCM rate two wire codecs both code at, so that re-encoding audio from one to the other needs
 * no resampler (8 kHz with G.711 on either side, 16 kHz between G.722 and G.722 or Opus, 48 kHz
 * between two Opus streams).
 */
export function transcodingRate(a: WireCodecName, b: WireCodecName): AudioSampleRate {
  if (a === 'opus' && b === 'opus') return 48000;
  return Math.min(codecPcmRate(a, 48000), codecPcmRate(b, 48000)) as AudioSampleRate;
}
