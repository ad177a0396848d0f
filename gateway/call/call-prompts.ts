/**
 * Fixed lines callgate says by itself, without a model: the apology while a lost model session is
 * re-opened, and the goodbye when it cannot be. They have to play exactly when the model is gone,
 * so they are rendered ahead (at gateway start for the usual codec, otherwise on the first call
 * that needs one) with espeak-ng and sox, and kept per audio format. A machine without espeak-ng
 * gets silence of the same purpose (a pause, not a dead line) and one warning in the log.
 */
import type { Logger } from '../../config/log.ts';
import { bytesPerMs, type AudioFormat } from '../realtime/realtime-session.ts';
import { SpeechSynthesizer } from '../realtime/simulator/speech-synthesizer.ts';

export type CallPromptKind = 'reconnecting' | 'goodbye';

export const CALL_PROMPT_TEXT: Readonly<Record<CallPromptKind, string>> = {
  reconnecting: 'Sorry, I lost my connection for a moment. Please stay on the line.',
  goodbye:
    'Sorry, I cannot continue this call right now. Anything still in progress will be sent to you in a message. Goodbye.',
};

/** The pause played in place of a prompt that could not be rendered: long enough to read as intended. */
export const SILENT_PROMPT_MS = 1_000;

const SILENCE_BYTE: Readonly<Record<AudioFormat, number>> = { pcmu: 0xff, pcma: 0xd5, pcm24k: 0 };

export interface CallPrompt {
  readonly kind: CallPromptKind;
  /** In the call's model audio format, ready for RtpSession.play(). */
  readonly audio: Buffer;
  readonly ms: number;
  /** `silence` when espeak-ng or sox were not usable. */
  readonly rendered: 'speech' | 'silence';
}

export interface CallPromptsOptions {
  readonly log: Logger;
  /** Renders text to audio; espeak-ng and sox at their Debian paths by default. */
  readonly synthesizer?: Pick<SpeechSynthesizer, 'render'>;
}

export class CallPrompts {
  private readonly cache = new Map<string, Promise<CallPrompt>>();
  private readonly synthesizer: Pick<SpeechSynthesizer, 'render'>;
  private warned = false;

  constructor(private readonly options: CallPromptsOptions) {
    this.synthesizer = options.synthesizer ?? new SpeechSynthesizer();
  }

  /** Renders every prompt in these formats now, so a call that needs one does not wait. */
  async prepare(formats: readonly AudioFormat[]): Promise<void> {
    await Promise.all(
      formats.flatMap((format) =>
        (Object.keys(CALL_PROMPT_TEXT) as CallPromptKind[]).map((kind) => this.get(kind, format)),
      ),
    );
  }

  /** The prompt in this format; never rejects (silence when it cannot be rendered). */
  get(kind: CallPromptKind, format: AudioFormat): Promise<CallPrompt> {
    const key = `${kind}:${format}`;
    let prompt = this.cache.get(key);
    if (prompt === undefined) {
      prompt = this.render(kind, format);
      this.cache.set(key, prompt);
    }
    return prompt;
  }

  private async render(kind: CallPromptKind, format: AudioFormat): Promise<CallPrompt> {
    try {
      const audio = await this.synthesizer.render(CALL_PROMPT_TEXT[kind], format);
      return { kind, audio, ms: Math.floor(audio.length / bytesPerMs(format)), rendered: 'speech' };
    } catch (error) {
      if (!this.warned) {
        this.warned = true;
        this.options.log.warn(
          'call prompts cannot be rendered (is espeak-ng installed?); callers hear a pause instead',
          { error },
        );
      }
      const audio = Buffer.alloc(SILENT_PROMPT_MS * bytesPerMs(format), SILENCE_BYTE[format]);
      return { kind, audio, ms: SILENT_PROMPT_MS, rendered: 'silence' };
    }
  }
}
