import { describe, expect, it } from 'vitest';
import { Resampler, type AudioSampleRate } from '../../../gateway/media/resampler.ts';

const RATES: AudioSampleRate[] = [8000, 16000, 24000, 48000];
const SECONDS = 0.5;

function tone(rate: number, frequency: number, amplitude: number, seconds = SECONDS): Int16Array {
  const out = new Int16Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++)
    out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * frequency * i) / rate));
  return out;
}

/** Feeds the input in 20 ms chunks, as the media path does, and joins the output. */
function resampleStreaming(resampler: Resampler, input: Int16Array): Int16Array {
  const chunk = resampler.fromRate / 50;
  const parts: Int16Array[] = [];
  for (let i = 0; i < input.length; i += chunk)
    parts.push(resampler.process(input.subarray(i, i + chunk)));
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Amplitude of the steady part of a signal (skipping the filter's start-up at both ends). */
function steadyAmplitude(signal: Int16Array, rate: number): number {
  const skip = Math.round(rate * 0.05);
  let sum = 0;
  let n = 0;
  for (let i = skip; i < signal.length - skip; i++) {
    sum += (signal[i] as number) ** 2;
    n++;
  }
  return Math.sqrt((2 * sum) / n);
}

const pairs = RATES.flatMap((from) =>
  RATES.filter((to) => to !== from).map((to) => [from, to] as const),
);

describe('when resampling between telephony and model rates', () => {
  for (const [from, to] of pairs) {
    const nyquist = Math.min(from, to) / 2;
    it(`should keep passband tones within 0.5 dB from ${from} to ${to} Hz`, () => {
      for (const fraction of [0.05, 0.25, 0.5, 0.7]) {
        const frequency = Math.round(nyquist * fraction);
        const out = resampleStreaming(
          new Resampler({ fromRate: from, toRate: to }),
          tone(from, frequency, 10000),
        );
        expect(out.length).toBeGreaterThan(to * SECONDS * 0.9);
        const gainDb = 20 * Math.log10(steadyAmplitude(out, to) / 10000);
        expect(Math.abs(gainDb)).toBeLessThan(0.5);
      }
    });
    if (to < from) {
      it(`should attenuate tones above the ${to} Hz Nyquist frequency by at least 50 dB`, () => {
        for (const factor of [1.1, 1.5, 2.5]) {
          const frequency = nyquist * factor;
          if (frequency >= from / 2) continue;
          const out = resampleStreaming(
            new Resampler({ fromRate: from, toRate: to }),
            tone(from, frequency, 20000),
          );
          const gainDb = 20 * Math.log10(Math.max(steadyAmplitude(out, to), 1e-3) / 20000);
          expect(gainDb).toBeLessThan(-50);
        }
      });
    }
  }

  it('should produce exactly the rate ratio of samples over a long stream', () => {
    const resampler = new Resampler({ fromRate: 16000, toRate: 24000 });
    const input = tone(16000, 440, 1000, 2);
    const out = resampleStreaming(resampler, input);
    // Only the filter's look-ahead is still inside the resampler.
    expect(out.length).toBe(Math.ceil(((input.length - resampler.latencySamples) * 3) / 2));
  });

  it('should not clip or wrap a near full-scale tone or a full-scale square wave', () => {
    for (const [from, to] of pairs) {
      const out = resampleStreaming(
        new Resampler({ fromRate: from, toRate: to }),
        tone(from, 300, 29000),
      );
      expect(Math.max(...out)).toBeLessThan(32767);
      expect(Math.min(...out)).toBeGreaterThan(-32768);
      // A square wave overshoots (Gibbs); samples must saturate, never flip sign.
      const square = tone(from, 200, 1).map((s, i) =>
        Math.sin((2 * Math.PI * 200 * i) / from) >= 0 ? 32767 : -32768,
      );
      const squared = resampleStreaming(new Resampler({ fromRate: from, toRate: to }), square);
      const period = to / 200;
      for (let i = Math.round(to * 0.05); i < squared.length - period; i++) {
        const phase = (i % period) / period;
        // Away from the edges the wave must keep its sign.
        if (phase > 0.1 && phase < 0.4) expect(squared[i]).toBeGreaterThan(20000);
        if (phase > 0.6 && phase < 0.9) expect(squared[i]).toBeLessThan(-20000);
      }
    }
  });

  it('should give out the whole stream once drained, and start the next from silence', () => {
    for (const [from, to] of pairs) {
      const resampler = new Resampler({ fromRate: from, toRate: to });
      const input = tone(from, 300, 8000, 0.2);
      const out = resampleStreaming(resampler, input);
      const tail = resampler.drain();
      // Every input sample is accounted for: the stream's length times the rate ratio.
      expect(out.length + tail.length, `${from} -> ${to}`).toBe(
        Math.ceil((input.length * to) / from),
      );
      // The tail is the tone's end, not silence: its first samples are at the tone's level.
      expect(
        Math.max(...tail.subarray(0, Math.max(1, tail.length >> 1)).map(Math.abs)),
        `${from} -> ${to}`,
      ).toBeGreaterThan(2000);
      // Nothing of the tone is left for the next stream.
      const next = resampleStreaming(resampler, new Int16Array(from / 10));
      expect(Math.max(0, ...next.map(Math.abs)), `${from} -> ${to}`).toBe(0);
    }
  });

  it('should pass audio through untouched when both rates are equal', () => {
    const input = tone(8000, 1000, 5000);
    expect(new Resampler({ fromRate: 8000, toRate: 8000 }).process(input)).toBe(input);
  });
});
