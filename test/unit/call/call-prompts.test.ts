import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import {
  CALL_PROMPT_TEXT,
  CallPrompts,
  SILENT_PROMPT_MS,
} from '../../../gateway/call/call-prompts.ts';
import { SpeechSynthesizer } from '../../../gateway/realtime/simulator/speech-synthesizer.ts';

function recordingLog(): { log: Logger; lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const log = new Logger({
    level: 'debug',
    sink: {
      write: (line: string) => lines.push(JSON.parse(line) as { level: string; msg: string }),
    },
  });
  return { log, lines };
}

describe('when espeak-ng renders the prompts', () => {
  it('should render each prompt once per format as speech in that format, and reuse it for every call', async () => {
    const real = new SpeechSynthesizer();
    const rendered: string[] = [];
    const prompts = new CallPrompts({
      log: recordingLog().log,
      synthesizer: {
        render: (text, format) => (rendered.push(`${format}:${text}`), real.render(text, format)),
      },
    });
    await prompts.prepare(['pcmu']);
    const first = await prompts.get('reconnecting', 'pcmu');
    const again = await prompts.get('reconnecting', 'pcmu');
    expect(again).toBe(first);
    expect(rendered).toEqual([
      `pcmu:${CALL_PROMPT_TEXT.reconnecting}`,
      `pcmu:${CALL_PROMPT_TEXT.goodbye}`,
    ]);
    expect(first.rendered).toBe('speech');
    // A spoken sentence of a dozen words: seconds of μ-law (8 bytes per ms), whole 20 ms frames, not silence.
    expect(first.ms).toBeGreaterThan(2_000);
    expect(first.audio.length).toBe(first.ms * 8);
    expect(first.audio.length % 160).toBe(0);
    expect(first.audio.filter((b) => b !== 0xff && b !== 0x7f).length).toBeGreaterThan(
      first.audio.length / 2,
    );
    const wide = await prompts.get('goodbye', 'pcm24k');
    expect(wide.audio.length).toBe(wide.ms * 48);
  });
});

describe('when espeak-ng is missing', () => {
  it('should give a second of silence in the call’s format and warn once', async () => {
    const { log, lines } = recordingLog();
    const prompts = new CallPrompts({
      log,
      synthesizer: new SpeechSynthesizer({ espeakPath: '/nonexistent/espeak-ng' }),
    });
    const ulaw = await prompts.get('reconnecting', 'pcmu');
    const alaw = await prompts.get('goodbye', 'pcma');
    expect(ulaw).toMatchObject({ rendered: 'silence', ms: SILENT_PROMPT_MS });
    expect(ulaw.audio).toEqual(Buffer.alloc(SILENT_PROMPT_MS * 8, 0xff));
    expect(alaw.audio).toEqual(Buffer.alloc(SILENT_PROMPT_MS * 8, 0xd5));
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
      expect.stringContaining('espeak-ng'),
    ]);
  });
});
