/**
 * An energy voice activity detector on the audio time line (not wall time): frames of FRAME_MS
 * whose RMS is above a threshold are voiced. Speech starts after MIN_SPEECH_MS of voiced frames in
 * a row (clicks do not count) and stops after `silenceDurationMs` without a voiced frame, like the
 * provider's server VAD. Offsets are in ms of input audio since the session began.
 */

/** Analysis frame; 20 ms is the telephony packet size, so one RTP frame is one VAD decision. */
export const FRAME_MS = 20;
/** Voiced run needed to start an utterance; below a syllable, so real speech always passes. */
export const MIN_SPEECH_MS = 60;

export interface EnergyVadOptions {
  sampleRate: number;
  /** Provider-style threshold 0..1 (server_vad default 0.5); mapped to dBFS by `thresholdDb`. */
  threshold?: number;
  /** Silence that ends an utterance (server_vad default 500 ms; pauses between words are shorter). */
  silenceDurationMs?: number;
}

export type VadTransition = { type: 'start'; atMs: number } | { type: 'stop'; atMs: number };

/** 0 -> -60 dBFS (anything not silent), 0.5 -> -35 dBFS (speech at telephone level), 1 -> -10 dBFS. */
export function thresholdDb(threshold: number): number {
  return -60 + 50 * Math.min(1, Math.max(0, threshold));
}

export class EnergyVad {
  private readonly frameSamples: number;
  private readonly thresholdRms: number;
  private readonly silenceDurationMs: number;
  private readonly pending: number[] = [];
  private processedMs = 0;
  private speaking = false;
  private voicedRunMs = 0;
  private voicedRunStartMs = 0;
  private lastVoicedEndMs = 0;

  constructor(options: EnergyVadOptions) {
    this.frameSamples = Math.round((options.sampleRate * FRAME_MS) / 1000);
    this.thresholdRms = 32768 * 10 ** (thresholdDb(options.threshold ?? 0.5) / 20);
    this.silenceDurationMs = options.silenceDurationMs ?? 500;
  }

  get isSpeaking(): boolean {
    return this.speaking;
  }

  /** Audio time consumed so far, in ms. */
  get positionMs(): number {
    return this.processedMs;
  }

  push(samples: Int16Array): VadTransition[] {
    const transitions: VadTransition[] = [];
    for (const sample of samples) {
      this.pending.push(sample);
      if (this.pending.length === this.frameSamples) {
        this.frame(transitions);
        this.pending.length = 0;
      }
    }
    return transitions;
  }

  /** Forgets any speech in progress (input buffer cleared or committed by hand). */
  reset(): void {
    this.speaking = false;
    this.voicedRunMs = 0;
  }

  private frame(transitions: VadTransition[]): void {
    let sum = 0;
    for (const sample of this.pending) sum += sample * sample;
    const rms = Math.sqrt(sum / this.pending.length);
    const startMs = this.processedMs;
    this.processedMs += FRAME_MS;
    if (rms >= this.thresholdRms) {
      if (this.voicedRunMs === 0) this.voicedRunStartMs = startMs;
      this.voicedRunMs += FRAME_MS;
      this.lastVoicedEndMs = this.processedMs;
      if (!this.speaking && this.voicedRunMs >= MIN_SPEECH_MS) {
        this.speaking = true;
        transitions.push({ type: 'start', atMs: this.voicedRunStartMs });
      }
      return;
    }
    this.voicedRunMs = 0;
    if (this.speaking && this.processedMs - this.lastVoicedEndMs >= this.silenceDurationMs) {
      this.speaking = false;
      transitions.push({ type: 'stop', atMs: this.processedMs });
    }
  }
}
