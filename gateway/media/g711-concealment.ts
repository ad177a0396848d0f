/**
 * Concealment of one lost G.711 frame: the previous frame again, 6 dB down, with its first
 * samples cross-faded from the last sample heard so the seam does not click. Longer losses are
 * not concealed: repeating speech for more than 20 ms sounds worse than a short gap.
 */
import {
  ALAW_SILENCE,
  ULAW_SILENCE,
  alawToLinear,
  linearToAlaw,
  linearToUlaw,
  ulawToLinear,
} from './g711.ts';

/** Half amplitude: present enough to bridge the gap, quiet enough not to sound like a stutter. */
const CONCEALMENT_GAIN = 0.5;
/** 2 ms at 8 kHz: long enough to hide the seam, short enough to keep the repeated waveform. */
const SEAM_SAMPLES = 16;

export type G711Law = 'PCMU' | 'PCMA';

export function concealG711Frame(previous: Buffer, law: G711Law): Buffer {
  const decode = law === 'PCMU' ? ulawToLinear : alawToLinear;
  const encode = law === 'PCMU' ? linearToUlaw : linearToAlaw;
  const out = Buffer.alloc(previous.length, law === 'PCMU' ? ULAW_SILENCE : ALAW_SILENCE);
  if (previous.length === 0) return out;
  const last = decode(previous[previous.length - 1] as number);
  for (let i = 0; i < previous.length; i++) {
    const repeated = decode(previous[i] as number) * CONCEALMENT_GAIN;
    const blend = i < SEAM_SAMPLES ? (i + 1) / (SEAM_SAMPLES + 1) : 1;
    out[i] = encode(last * (1 - blend) + repeated * blend);
  }
  return out;
}
