/**
 * What audio looks like on each side of the media layer: the RTP codec negotiated with the caller
 * (from SDP) and the format the realtime model speaks. Types only.
 */
import type { AudioSampleRate } from './resampler.ts';

export type WireCodecName = 'PCMU' | 'PCMA' | 'opus';

export interface WireCodec {
  readonly name: WireCodecName;
  readonly payloadType: number;
  /** RTP timestamp clock: 8000 for G.711, always 48000 for Opus (RFC 7587). */
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
/** The RTP clock rate of Opus, whatever the audio bandwidth (RFC 7587 §4.1). */
const OPUS_RTP_CLOCK_RATE = 48000;

export function wireCodec(name: WireCodecName, payloadType?: number): WireCodec {
  if (name === 'PCMU') return { ...PCMU, payloadType: payloadType ?? PCMU.payloadType };
  if (name === 'PCMA') return { ...PCMA, payloadType: payloadType ?? PCMA.payloadType };
  return { name, payloadType: payloadType ?? 111, clockRate: OPUS_RTP_CLOCK_RATE };
}

/** RTP timestamp units in one 20 ms frame. */
export function samplesPerFrame(codec: WireCodec): number {
  return (codec.clockRate * FRAME_MS) / 1000;
}
