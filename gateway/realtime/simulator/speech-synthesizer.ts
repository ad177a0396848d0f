/**
 * Real, intelligible speech for the simulator: espeak-ng renders the text to WAV, sox converts it
 * to the session's output format (8 kHz G.711 or 24 kHz 16-bit PCM). Both are Debian packages the
 * bootstrap installs. Rendered lines are cached (a demo says the same lines on every call), and
 * concurrent renders of one line share one child process.
 */
import { spawn } from 'node:child_process';
import { CallgateError } from '../../../config/errors.ts';
import { releaseInheritedPriority } from '../../process-priority.ts';
import { bytesPerMs, type AudioFormat } from '../realtime-session.ts';

/** espeak-ng renders a sentence in tens of ms; a child this slow is stuck. */
export const SYNTHESIS_TIMEOUT_MS = 15_000;
/** Lines kept rendered; a script has a few dozen, and each is a few tens of KB. */
export const CACHE_ENTRIES = 256;
/** Longest line rendered; a script line is a sentence or two. */
export const MAX_TEXT_CHARS = 2_000;

export interface SpeechSynthesizerOptions {
  espeakPath?: string;
  soxPath?: string;
  /** espeak-ng voice name. */
  voice?: string;
  /** Speaking rate in words per minute; 160 is espeak's natural pace and easy to follow on a phone. */
  wordsPerMinute?: number;
  timeoutMs?: number;
}

const SOX_OUTPUT: Readonly<Record<AudioFormat, readonly string[]>> = {
  pcmu: ['-r', '8000', '-e', 'u-law', '-b', '8', '-c', '1'],
  pcma: ['-r', '8000', '-e', 'a-law', '-b', '8', '-c', '1'],
  pcm24k: ['-r', '24000', '-e', 'signed-integer', '-b', '16', '-c', '1', '-L'],
};

/** Lines are padded with silence to whole 20 ms frames, so every RTP packet of a line is full. */
const FRAME_MS = 20;
const SILENCE_BYTE: Readonly<Record<AudioFormat, number>> = { pcmu: 0xff, pcma: 0xd5, pcm24k: 0 };

function padToFrames(audio: Buffer, format: AudioFormat): Buffer {
  const frameBytes = FRAME_MS * bytesPerMs(format);
  const remainder = audio.length % frameBytes;
  if (remainder === 0) return audio;
  return Buffer.concat([audio, Buffer.alloc(frameBytes - remainder, SILENCE_BYTE[format])]);
}

export class SpeechSynthesizer {
  private readonly cache = new Map<string, Promise<Buffer>>();
  private readonly espeakPath: string;
  private readonly soxPath: string;
  private readonly voice: string;
  private readonly wordsPerMinute: number;
  private readonly timeoutMs: number;

  constructor(options: SpeechSynthesizerOptions = {}) {
    this.espeakPath = options.espeakPath ?? '/usr/bin/espeak-ng';
    this.soxPath = options.soxPath ?? '/usr/bin/sox';
    this.voice = options.voice ?? 'en-us';
    this.wordsPerMinute = options.wordsPerMinute ?? 160;
    this.timeoutMs = options.timeoutMs ?? SYNTHESIS_TIMEOUT_MS;
  }

  render(text: string, format: AudioFormat): Promise<Buffer> {
    const line = text.slice(0, MAX_TEXT_CHARS);
    const key = `${format}\u0000${line}`;
    const cached = this.cache.get(key);
    if (cached !== undefined) {
      // Refresh its place so the cache evicts the least recently used line.
      this.cache.delete(key);
      this.cache.set(key, cached);
      return cached;
    }
    const rendering = this.spawnRender(line, format);
    this.cache.set(key, rendering);
    rendering.catch(() => this.cache.delete(key));
    if (this.cache.size > CACHE_ENTRIES) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    return rendering;
  }

  private spawnRender(text: string, format: AudioFormat): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      // Text goes in on stdin, never as an argument: a line starting with '-' is not an option.
      const espeak = spawn(
        this.espeakPath,
        ['--stdout', '--stdin', '-v', this.voice, '-s', String(this.wordsPerMinute)],
        {
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      const sox = spawn(
        this.soxPath,
        ['-V1', '-t', 'wav', '-', '-t', 'raw', ...SOX_OUTPUT[format], '-'],
        { stdio: ['pipe', 'pipe', 'pipe'] },
      );
      // Rendering can wait: not at the event loop's raised priority (gateway.nice).
      releaseInheritedPriority(espeak.pid);
      releaseInheritedPriority(sox.pid);
      const chunks: Buffer[] = [];
      const problems: string[] = [];
      let settled = false;
      const fail = (reason: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        espeak.kill('SIGKILL');
        sox.kill('SIGKILL');
        reject(new CallgateError('CALLGATE_ERR_SIMULATOR_SPEECH', { reason }));
      };
      const timer = setTimeout(() => fail(`no audio within ${this.timeoutMs} ms`), this.timeoutMs);
      espeak.on('error', (error) => fail(`espeak-ng: ${error.message}`));
      sox.on('error', (error) => fail(`sox: ${error.message}`));
      espeak.stderr.on('data', (data: Buffer) => problems.push(data.toString()));
      sox.stderr.on('data', (data: Buffer) => problems.push(data.toString()));
      espeak.stdout.pipe(sox.stdin);
      // A sox that exits early closes its stdin; the broken pipe is reported by the exit code.
      sox.stdin.on('error', () => undefined);
      espeak.stdin.on('error', () => undefined);
      sox.stdout.on('data', (data: Buffer) => chunks.push(data));
      sox.on('close', (code) => {
        if (settled) return;
        if (code !== 0) {
          fail(`sox exited with ${code}: ${problems.join(' ').trim().slice(0, 200)}`);
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(padToFrames(Buffer.concat(chunks), format));
      });
      espeak.stdin.end(`${text}\n`);
    });
  }
}
