/**
 * G.722 for RTP (RFC 3551 §4.5.2) through spandsp's bit-exact ITU-T G.722 at 64 kbit/s, loaded
 * from callgate's native module (gateway/media/native/g722_codec.c). The audio is 16 kHz, but the
 * RTP clock runs at 8000 Hz (an error in the original RFC 1890 kept for compatibility): a 20 ms
 * frame is 320 samples, 160 bytes, and 160 timestamp units. Encoder and decoder are adaptive, so
 * each direction of each call has its own. A module built without libspandsp loads, and the
 * codec's constructor then throws a CallgateError saying so, which refuses the call at setup.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { CallgateError } from '../../config/errors.ts';

/** 20 ms at 16 kHz. */
export const G722_FRAME_SAMPLES = 320;
/** 20 ms at 64 kbit/s: one byte per two samples. */
export const G722_FRAME_BYTES = 160;

type Handle = object;

interface G722Binding {
  readonly available: boolean;
  readonly reason?: string;
  createEncoder(): Handle;
  encode(encoder: Handle, pcm: Buffer): Buffer;
  createDecoder(): Handle;
  decode(decoder: Handle, data: Buffer): Buffer;
}

const G722_MODULE_PATH = fileURLToPath(
  new URL('./native/build/Release/g722_codec.node', import.meta.url),
);

let loaded: G722Binding | Error | undefined;

function loadBinding(): G722Binding | Error {
  loaded ??= load();
  return loaded;
}

function load(): G722Binding | Error {
  try {
    if (!existsSync(G722_MODULE_PATH))
      throw new Error(`${G722_MODULE_PATH} is not built (npm run build:native)`);
    const binding = createRequire(import.meta.url)(G722_MODULE_PATH) as G722Binding;
    return binding.available ? binding : new Error(binding.reason ?? 'built without spandsp');
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

export class G722Codec {
  private readonly binding: G722Binding;
  private readonly encoder: Handle;
  private readonly decoder: Handle;

  /** @throws CallgateError CALLGATE_ERR_MEDIA_CODEC when the native module has no G.722. */
  constructor() {
    const binding = loadBinding();
    if (binding instanceof Error) {
      throw new CallgateError(
        'CALLGATE_ERR_MEDIA_CODEC',
        { codec: 'G722', reason: `unavailable: ${binding.message}` },
        { cause: binding },
      );
    }
    this.binding = binding;
    this.encoder = binding.createEncoder();
    this.decoder = binding.createDecoder();
  }

  /** Encodes exactly one 20 ms frame of 16 kHz PCM to 160 bytes. */
  encode(frame: Int16Array): Buffer {
    if (frame.length !== G722_FRAME_SAMPLES) {
      throw new CallgateError('CALLGATE_ERR_MEDIA_CODEC', {
        codec: 'G722',
        reason: `frame of ${frame.length} samples, expected ${G722_FRAME_SAMPLES}`,
      });
    }
    return this.binding.encode(
      this.encoder,
      Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength),
    );
  }

  /** Decodes one payload (any length: every byte is two samples) to 16 kHz PCM. */
  decode(payload: Buffer): Int16Array | null {
    if (payload.length === 0) return null;
    const pcm = this.binding.decode(this.decoder, payload);
    const samples = pcm.length >> 1;
    if (pcm.byteOffset % 2 === 0) return new Int16Array(pcm.buffer, pcm.byteOffset, samples);
    const copy = new Int16Array(samples);
    for (let i = 0; i < samples; i++) copy[i] = pcm.readInt16LE(2 * i);
    return copy;
  }
}

/**
 * 20 ms of silence in G.722, from an encoder of its own: a constant payload that a decoder in any
 * state settles to silence on, so comfort silence never moves a call's encoder state.
 */
let silence: Buffer | undefined;

export function g722SilenceFrame(): Buffer {
  if (silence === undefined) {
    const codec = new G722Codec();
    // The encoder's first frames carry its start-up adaptation; a settled frame repeats.
    for (let i = 0; i < 4; i++) silence = codec.encode(new Int16Array(G722_FRAME_SAMPLES));
  }
  return Buffer.from(silence as Buffer);
}
