/**
 * RIFF/WAVE files of mono audio, pure: a canonical 44-byte header (46 for G.711, whose format
 * chunk carries the cbSize field) before the samples. G.711 is written as is (format 7 μ-law,
 * 6 A-law, 8 bits per sample), PCM16 little-endian as format 1.
 */
import type { ModelAudioFormat } from './audio-format.ts';

const WAVE_FORMAT_PCM = 1;
const WAVE_FORMAT_ALAW = 6;
const WAVE_FORMAT_MULAW = 7;

export function wavFile(
  encoding: ModelAudioFormat['encoding'],
  sampleRate: number,
  data: Buffer,
): Buffer {
  const g711 = encoding !== 'pcm16';
  const bitsPerSample = g711 ? 8 : 16;
  const blockAlign = bitsPerSample / 8;
  const fmtBytes = g711 ? 18 : 16;
  const headerBytes = 12 + 8 + fmtBytes + 8;
  const out = Buffer.alloc(headerBytes + data.length + (data.length % 2));
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(out.length - 8, 4);
  out.write('WAVE', 8, 'ascii');
  out.write('fmt ', 12, 'ascii');
  out.writeUInt32LE(fmtBytes, 16);
  out.writeUInt16LE(
    encoding === 'pcmu'
      ? WAVE_FORMAT_MULAW
      : encoding === 'pcma'
        ? WAVE_FORMAT_ALAW
        : WAVE_FORMAT_PCM,
    20,
  );
  out.writeUInt16LE(1, 22);
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * blockAlign, 28);
  out.writeUInt16LE(blockAlign, 32);
  out.writeUInt16LE(bitsPerSample, 34);
  if (g711) out.writeUInt16LE(0, 36);
  out.write('data', headerBytes - 8, 'ascii');
  out.writeUInt32LE(data.length, headerBytes - 4);
  data.copy(out, headerBytes);
  return out;
}

export interface WavContents {
  readonly format: number;
  readonly sampleRate: number;
  readonly bitsPerSample: number;
  readonly data: Buffer;
}

/** Reads the format and the data chunk of a mono WAV file; null when it is not one. */
export function readWavFile(file: Buffer): WavContents | null {
  if (
    file.length < 12 ||
    file.toString('ascii', 0, 4) !== 'RIFF' ||
    file.toString('ascii', 8, 12) !== 'WAVE'
  )
    return null;
  let offset = 12;
  let format: { format: number; sampleRate: number; bitsPerSample: number } | undefined;
  while (offset + 8 <= file.length) {
    const id = file.toString('ascii', offset, offset + 4);
    const size = file.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ' && body + 16 <= file.length) {
      format = {
        format: file.readUInt16LE(body),
        sampleRate: file.readUInt32LE(body + 4),
        bitsPerSample: file.readUInt16LE(body + 14),
      };
    } else if (id === 'data' && format !== undefined) {
      return { ...format, data: file.subarray(body, Math.min(file.length, body + size)) };
    }
    offset = body + size + (size % 2);
  }
  return null;
}
