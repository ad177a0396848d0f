import { describe, expect, it } from 'vitest';
import { PCMA, PCMU, wireCodec } from '../../../gateway/media/audio-format.ts';
import { decodeUlaw, encodeUlaw, linearToAlaw, linearToUlaw } from '../../../gateway/media/g711.ts';
import { OPUS_FRAME_SAMPLES, OpusCodec } from '../../../gateway/media/opus-codec.ts';
import { pcm16FromBytes, pcm16ToBytes } from '../../../gateway/media/pcm.ts';
import { ReceiveTranscoder } from '../../../gateway/media/receive-transcoder.ts';
import { SendTranscoder } from '../../../gateway/media/send-transcoder.ts';

function tone(rate: number, frequency: number, amplitude: number, samples: number): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) =>
    Math.round(amplitude * Math.sin((2 * Math.PI * frequency * i) / rate)),
  );
}

/** Amplitude of one frequency in a signal (Goertzel), so a test can say which tone came out. */
function toneAmplitude(signal: Int16Array, rate: number, frequency: number): number {
  const w = (2 * Math.PI * frequency) / rate;
  let s1 = 0;
  let s2 = 0;
  for (const x of signal) {
    const s0 = x + 2 * Math.cos(w) * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  const power = s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2;
  return (2 * Math.sqrt(power)) / signal.length;
}

describe('when the call and the model both speak PCMU', () => {
  it('should pass received payloads through unchanged', () => {
    const receive = new ReceiveTranscoder({ wire: PCMU, model: { encoding: 'pcmu' } });
    const payload = Buffer.from(Array.from({ length: 160 }, (_, i) => i));
    expect(receive.passthrough).toBe(true);
    expect(receive.convert(payload)).toBe(payload);
  });

  it('should slice model audio into 160-byte frames without changing a byte, padding the last with silence', () => {
    const send = new SendTranscoder({ wire: PCMU, model: { encoding: 'pcmu' } });
    const audio = Buffer.from(Array.from({ length: 500 }, (_, i) => i % 256));
    const frames = [
      ...send.push(audio.subarray(0, 100)),
      ...send.push(audio.subarray(100, 333)),
      ...send.push(audio.subarray(333)),
    ];
    expect(frames.map((f) => f.length)).toEqual([160, 160, 160]);
    const last = send.flush();
    expect(last.map((f) => f.length)).toEqual([160]);
    expect(
      Buffer.concat([...frames, ...last]).equals(Buffer.concat([audio, Buffer.alloc(140, 0xff)])),
    ).toBe(true);
    expect(send.flush()).toEqual([]);
  });
});

describe('when the call speaks PCMA and the model PCMU', () => {
  it('should transcode code for code through linear', () => {
    const samples = tone(8000, 400, 8000, 160);
    const receive = new ReceiveTranscoder({ wire: PCMA, model: { encoding: 'pcmu' } });
    const send = new SendTranscoder({ wire: PCMA, model: { encoding: 'pcmu' } });
    const alaw = Buffer.from([...samples].map((s) => linearToAlaw(s)));
    const ulaw = receive.convert(alaw);
    expect(ulaw?.length).toBe(160);
    // Two companding steps keep the waveform within a few percent of full scale.
    const back = decodeUlaw(ulaw ?? Buffer.alloc(0));
    for (let i = 0; i < 160; i++)
      expect(Math.abs((back[i] as number) - (samples[i] as number))).toBeLessThan(400);
    const frames = send.push(encodeUlaw(samples));
    expect(frames).toHaveLength(1);
    expect(frames[0]?.[0]).toBe(linearToAlaw(samples[0] as number));
    expect(linearToUlaw(0)).toBe(0xff);
  });
});

describe('when the model speaks 24 kHz PCM16', () => {
  it('should send 8 kHz G.711 frames that carry the same tone', () => {
    const send = new SendTranscoder({
      wire: PCMU,
      model: { encoding: 'pcm16', sampleRate: 24000 },
    });
    const bytes = pcm16ToBytes(tone(24000, 1000, 10000, 24000 * 0.4));
    // Odd chunk sizes split samples across pushes.
    const frames: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 333)
      frames.push(...send.push(bytes.subarray(i, i + 333)));
    expect(frames.length).toBeGreaterThanOrEqual(19);
    expect(frames.every((f) => f.length === 160)).toBe(true);
    const pcm = decodeUlaw(Buffer.concat(frames.slice(2)));
    expect(toneAmplitude(pcm, 8000, 1000)).toBeGreaterThan(9000);
    expect(toneAmplitude(pcm, 8000, 2000)).toBeLessThan(300);
  });

  it('should deliver caller PCMU to the model as 24 kHz PCM16 at three times the samples', () => {
    const receive = new ReceiveTranscoder({
      wire: PCMU,
      model: { encoding: 'pcm16', sampleRate: 24000 },
    });
    const ulaw = encodeUlaw(tone(8000, 700, 10000, 8000));
    const parts: Buffer[] = [];
    for (let i = 0; i < ulaw.length; i += 160)
      parts.push(receive.convert(ulaw.subarray(i, i + 160)) ?? Buffer.alloc(0));
    const pcm = pcm16FromBytes(Buffer.concat(parts));
    expect(Math.abs(pcm.length - 24000)).toBeLessThan(100);
    expect(toneAmplitude(pcm.subarray(2400), 24000, 700)).toBeGreaterThan(9000);
  });
});

describe('when the call speaks Opus', () => {
  it('should carry a model tone through Opus encode and decode', () => {
    const opus = wireCodec('opus', 111);
    const send = new SendTranscoder({
      wire: opus,
      model: { encoding: 'pcm16', sampleRate: 24000 },
    });
    const receive = new ReceiveTranscoder({
      wire: opus,
      model: { encoding: 'pcm16', sampleRate: 24000 },
    });
    const frames = send.push(pcm16ToBytes(tone(24000, 440, 8000, 24000 * 0.5)));
    expect(frames.length).toBeGreaterThanOrEqual(24);
    expect(frames.every((f) => f.length > 0 && f.length < 400)).toBe(true);
    const decoded = pcm16FromBytes(
      Buffer.concat(frames.map((f) => receive.convert(f) ?? Buffer.alloc(0))),
    );
    expect(Math.abs(decoded.length - frames.length * 480)).toBeLessThan(100);
    const steady = decoded.subarray(4800);
    expect(toneAmplitude(steady, 24000, 440)).toBeGreaterThan(5000);
  });

  it('should return null for a payload libopus rejects instead of throwing', () => {
    const receive = new ReceiveTranscoder({ wire: wireCodec('opus'), model: { encoding: 'pcmu' } });
    expect(receive.convert(Buffer.alloc(0))).toBeNull();
    const codec = new OpusCodec();
    expect(() => codec.encode(new Int16Array(OPUS_FRAME_SAMPLES - 1))).toThrow(/codec opus/);
  });

  it('should survive 2,000 random payloads, each decoding to audio or null', () => {
    const receive = new ReceiveTranscoder({ wire: wireCodec('opus'), model: { encoding: 'pcmu' } });
    let decoded = 0;
    let rejected = 0;
    let seed = 1;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    for (let i = 0; i < 2000; i++) {
      const payload = Buffer.from(Array.from({ length: 1 + (next() % 200) }, next));
      const audio = receive.convert(payload);
      if (audio === null) rejected++;
      else decoded++;
      // An Opus packet holds at most 120 ms: 960 bytes of 8 kHz PCMU (plus resampler carry-over).
      expect(audio?.length ?? 0).toBeLessThanOrEqual(1100);
    }
    expect(decoded + rejected).toBe(2000);
  });
});

describe('when a 24 kHz model answer ends and the next begins', () => {
  it('should put the whole answer, resampler tail included, into its own frames and nothing of it into the next', () => {
    const send = new SendTranscoder({
      wire: PCMU,
      model: { encoding: 'pcm16', sampleRate: 24000 },
    });
    const answer = send.push(pcm16ToBytes(tone(24000, 400, 8000, 24000 * 0.61)));
    const ending = send.flush();
    // 610 ms of audio at 8 kHz is 4880 samples: 30 frames and a padded 31st.
    expect(answer.length + ending.length).toBe(31);
    const last = decodeUlaw(ending.at(-1) ?? Buffer.alloc(0));
    // The last 10 ms of the answer is in its last frame, at the tone's level.
    expect(Math.max(...last.subarray(0, 70).map(Math.abs))).toBeGreaterThan(6000);
    const next = send.push(pcm16ToBytes(new Int16Array(24000 * 0.2)));
    // 200 ms less the new stream's filter delay: 9 whole frames so far.
    expect(next).toHaveLength(9);
    for (const frame of next) expect(Math.max(...decodeUlaw(frame).map(Math.abs))).toBeLessThan(16);
  });
});
