import { describe, expect, it } from 'vitest';
import {
  EnergyVad,
  FRAME_MS,
  thresholdDb,
} from '../../../gateway/realtime/simulator/energy-vad.ts';

const RATE = 8000;

function tone(ms: number, amplitude: number): Int16Array {
  const out = new Int16Array((RATE * ms) / 1000);
  for (let i = 0; i < out.length; i++)
    out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / RATE));
  return out;
}

function silence(ms: number): Int16Array {
  return new Int16Array((RATE * ms) / 1000);
}

describe('when the input is silence', () => {
  it('should report no speech', () => {
    const vad = new EnergyVad({ sampleRate: RATE });
    expect(vad.push(silence(3000))).toEqual([]);
    expect(vad.positionMs).toBe(3000);
  });
});

describe('when a voiced segment is surrounded by silence', () => {
  it('should start at the first voiced frame and stop after the silence duration', () => {
    const vad = new EnergyVad({ sampleRate: RATE, silenceDurationMs: 500 });
    const transitions = [
      ...vad.push(silence(400)),
      ...vad.push(tone(800, 8000)),
      ...vad.push(silence(1000)),
    ];
    expect(transitions).toEqual([
      { type: 'start', atMs: 400 },
      { type: 'stop', atMs: 1200 + 500 },
    ]);
  });

  it('should keep one utterance across pauses shorter than the silence duration', () => {
    const vad = new EnergyVad({ sampleRate: RATE, silenceDurationMs: 500 });
    const transitions = [
      ...vad.push(tone(300, 8000)),
      ...vad.push(silence(300)),
      ...vad.push(tone(300, 8000)),
      ...vad.push(silence(600)),
    ];
    expect(transitions.map((t) => t.type)).toEqual(['start', 'stop']);
  });

  it('should work on audio pushed in odd-sized pieces', () => {
    const vad = new EnergyVad({ sampleRate: RATE });
    const all = new Int16Array([...silence(200), ...tone(400, 8000), ...silence(800)]);
    const transitions = [];
    for (let i = 0; i < all.length; i += 37) transitions.push(...vad.push(all.subarray(i, i + 37)));
    expect(transitions).toEqual([
      { type: 'start', atMs: 200 },
      { type: 'stop', atMs: 600 + 500 },
    ]);
  });
});

describe('when a click is shorter than the minimum speech length', () => {
  it('should not start an utterance', () => {
    const vad = new EnergyVad({ sampleRate: RATE });
    expect([...vad.push(tone(FRAME_MS * 2, 12000)), ...vad.push(silence(1000))]).toEqual([]);
  });
});

describe('when the audio is quieter than the threshold', () => {
  it('should not count it as speech', () => {
    const vad = new EnergyVad({ sampleRate: RATE, threshold: 0.5 });
    // -35 dBFS is the threshold at 0.5; a tone at about -50 dBFS RMS stays below it.
    expect(vad.push(tone(1000, 150))).toEqual([]);
    expect(thresholdDb(0.5)).toBe(-35);
  });
});
