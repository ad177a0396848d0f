import { describe, expect, it } from 'vitest';
import { EnergyVad } from '../../../gateway/realtime/simulator/energy-vad.ts';
import { decodeMulaw, decodePcm16 } from '../../../gateway/realtime/simulator/g711.ts';
import { SpeechSynthesizer } from '../../../gateway/realtime/simulator/speech-synthesizer.ts';

const synthesizer = new SpeechSynthesizer();

/** Share of 20 ms frames that carry speech energy. */
function voicedShare(samples: Int16Array, rate: number): number {
  const frame = (rate * 20) / 1000;
  let voiced = 0;
  let frames = 0;
  for (let i = 0; i + frame <= samples.length; i += frame) {
    let sum = 0;
    for (let j = i; j < i + frame; j++) sum += (samples[j] ?? 0) ** 2;
    frames += 1;
    if (Math.sqrt(sum / frame) > 300) voiced += 1;
  }
  return voiced / frames;
}

describe('when a line is rendered with espeak-ng', () => {
  const line = 'Your table for four is booked for seven thirty.';

  it('should be 8 kHz μ-law of speech-like length and mostly voiced', async () => {
    const audio = await synthesizer.render(line, 'pcmu');
    const ms = audio.length / 8;
    const words = line.split(' ').length;
    // Natural speech runs at 2 to 4 words per second.
    expect(ms).toBeGreaterThan((words / 4) * 1000);
    expect(ms).toBeLessThan((words / 2) * 1000 + 1000);
    expect(ms % 20).toBe(0);
    expect(voicedShare(decodeMulaw(audio), 8000)).toBeGreaterThan(0.5);
    const vad = new EnergyVad({ sampleRate: 8000 });
    expect(vad.push(decodeMulaw(audio)).map((t) => t.type)).toContain('start');
  });

  it('should be 24 kHz PCM of the same length when asked for audio/pcm', async () => {
    const pcmu = await synthesizer.render(line, 'pcmu');
    const pcm = await synthesizer.render(line, 'pcm24k');
    expect(pcm.length / 48).toBe(pcmu.length / 8);
    expect(voicedShare(decodePcm16(pcm), 24000)).toBeGreaterThan(0.5);
  });

  it('should render a line once and serve it from the cache afterwards', async () => {
    const first = synthesizer.render('Cached line for the test.', 'pcmu');
    const second = synthesizer.render('Cached line for the test.', 'pcmu');
    expect(second).toBe(first);
    expect(await second).toBe(await first);
  });

  it('should treat a line starting with a dash as text, not as an option', async () => {
    const audio = await synthesizer.render('--help is not an option here', 'pcmu');
    expect(audio.length).toBeGreaterThan(8 * 1000);
  });

  it('should fail with CALLGATE_ERR_SIMULATOR_SPEECH when espeak-ng is missing', async () => {
    const broken = new SpeechSynthesizer({ espeakPath: '/nonexistent/espeak-ng' });
    await expect(broken.render('hello', 'pcmu')).rejects.toMatchObject({
      code: 'CALLGATE_ERR_SIMULATOR_SPEECH',
    });
  });
});
