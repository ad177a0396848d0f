import { describe, expect, it } from 'vitest';
import {
  G722,
  samplesPerFrame,
  transcodingRate,
  wireCodec,
} from '../../../gateway/media/audio-format.ts';
import {
  G722_FRAME_BYTES,
  G722_FRAME_SAMPLES,
  G722Codec,
  g722SilenceFrame,
} from '../../../gateway/media/g722-codec.ts';
import { pcm16FromBytes, pcm16ToBytes } from '../../../gateway/media/pcm.ts';
import { ReceiveTranscoder } from '../../../gateway/media/receive-transcoder.ts';
import { SendTranscoder } from '../../../gateway/media/send-transcoder.ts';

function tone(rate: number, frequency: number, amplitude: number, samples: number): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) =>
    Math.round(amplitude * Math.sin((2 * Math.PI * frequency * i) / rate)),
  );
}

/** Amplitude of one frequency in a signal (Goertzel). */
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

function rms(signal: Int16Array): number {
  return Math.sqrt(signal.reduce((sum, x) => sum + x * x, 0) / Math.max(1, signal.length));
}

function frames(signal: Int16Array, size: number): Int16Array[] {
  const out: Int16Array[] = [];
  for (let i = 0; i + size <= signal.length; i += size) out.push(signal.subarray(i, i + size));
  return out;
}

describe('when G.722 is the wire codec', () => {
  it('should be static payload type 9 on an 8 kHz RTP clock: 160 timestamp units per 20 ms', () => {
    expect(G722).toEqual({ name: 'G722', payloadType: 9, clockRate: 8000 });
    expect(wireCodec('G722')).toEqual(G722);
    expect(wireCodec('G722', 109).payloadType).toBe(109);
    expect(samplesPerFrame(G722)).toBe(160);
  });

  it('should transcode between G.722 and the other codecs at the highest rate both code', () => {
    expect(transcodingRate('G722', 'G722')).toBe(16000);
    expect(transcodingRate('G722', 'opus')).toBe(16000);
    expect(transcodingRate('opus', 'G722')).toBe(16000);
    expect(transcodingRate('PCMU', 'G722')).toBe(8000);
    expect(transcodingRate('opus', 'opus')).toBe(48000);
    expect(transcodingRate('PCMA', 'opus')).toBe(8000);
  });
});

describe('when a tone goes through the G.722 encoder and decoder', () => {
  it.each([
    [300, 8000],
    [1000, 4000],
    [3400, 8000],
    // Above telephone bandwidth: what G.722 is for.
    [6000, 6000],
  ])('should keep a %i Hz tone at its frequency and level (amplitude %i)', (frequency, level) => {
    const codec = new G722Codec();
    const input = tone(16000, frequency, level, 16000);
    const encoded = frames(input, G722_FRAME_SAMPLES).map((frame) => codec.encode(frame));
    expect(encoded.every((payload) => payload.length === G722_FRAME_BYTES)).toBe(true);
    const decoded = encoded.map((payload) => codec.decode(payload));
    expect(decoded.every((pcm) => pcm?.length === G722_FRAME_SAMPLES)).toBe(true);
    // The codec's delay and start-up adaptation are in the first frames: judge the steady part.
    const steady = Int16Array.from(decoded.slice(5).flatMap((pcm) => [...(pcm ?? [])]));
    expect(toneAmplitude(steady, 16000, frequency) / level).toBeGreaterThan(0.85);
    expect(toneAmplitude(steady, 16000, frequency) / level).toBeLessThan(1.15);
    // Nearly all of the output's energy is the tone: no other frequency came in its place.
    const toneRms = toneAmplitude(steady, 16000, frequency) / Math.SQRT2;
    expect(toneRms / rms(steady)).toBeGreaterThan(0.95);
  });

  it('should decode silence frames to near silence from any decoder state', () => {
    const codec = new G722Codec();
    for (const frame of frames(tone(16000, 1000, 12000, 3200), G722_FRAME_SAMPLES))
      codec.decode(codec.encode(frame));
    const silence = g722SilenceFrame();
    expect(silence).toHaveLength(G722_FRAME_BYTES);
    codec.decode(silence);
    expect(rms(codec.decode(silence) ?? new Int16Array(1))).toBeLessThan(50);
  });

  it('should refuse a frame that is not 20 ms, and decode an empty payload to null', () => {
    const codec = new G722Codec();
    expect(() => codec.encode(new Int16Array(160))).toThrow(/expected 320/);
    expect(codec.decode(Buffer.alloc(0))).toBeNull();
    // Every byte is a valid code: any payload decodes, two samples per byte.
    expect(codec.decode(Buffer.from([1, 2, 3]))?.length).toBe(6);
  });
});

describe('when the call speaks G.722 and the model 24 kHz PCM16', () => {
  const model = { encoding: 'pcm16', sampleRate: 24000 } as const;

  it('should send 160-byte frames that carry the model’s tone', () => {
    const send = new SendTranscoder({ wire: G722, model });
    expect(send.passthrough).toBe(false);
    expect(send.frameSamples).toBe(320);
    const sent = send.push(pcm16ToBytes(tone(24000, 5000, 8000, 24000)));
    // 1 s less the resampler's look-ahead.
    expect(sent.length).toBeGreaterThanOrEqual(49);
    expect(sent.every((payload) => payload.length === 160)).toBe(true);
    const decoder = new G722Codec();
    const heard = sent.map((payload) => decoder.decode(payload) ?? new Int16Array(0));
    const steady = Int16Array.from(heard.slice(5).flatMap((pcm) => [...pcm]));
    expect(toneAmplitude(steady, 16000, 5000) / 8000).toBeGreaterThan(0.8);
    expect(send.silenceFrame().equals(g722SilenceFrame())).toBe(true);
  });

  it('should give the model 20 ms of 24 kHz PCM per packet with the caller’s tone', () => {
    const receive = new ReceiveTranscoder({ wire: G722, model });
    const encoder = new G722Codec();
    const caller = frames(tone(16000, 440, 6000, 16000), G722_FRAME_SAMPLES);
    const heard = caller.map((frame) => receive.convert(encoder.encode(frame)));
    // After the resampler's start-up every packet yields 480 samples.
    expect(heard.slice(2).every((audio) => audio?.length === 960)).toBe(true);
    const pcm = pcm16FromBytes(Buffer.concat(heard.slice(5).map((a) => a ?? Buffer.alloc(0))));
    expect(toneAmplitude(pcm, 24000, 440) / 6000).toBeGreaterThan(0.85);
    expect(toneAmplitude(pcm, 24000, 440) / 6000).toBeLessThan(1.15);
  });

  it('should decode the caller’s G.722 to μ-law for a model that speaks it', () => {
    const receive = new ReceiveTranscoder({ wire: G722, model: { encoding: 'pcmu' } });
    const encoder = new G722Codec();
    const heard = frames(tone(16000, 440, 6000, 3200), 320).map((f) =>
      receive.convert(encoder.encode(f)),
    );
    expect(heard.slice(2).every((audio) => audio?.length === 160)).toBe(true);
  });
});
