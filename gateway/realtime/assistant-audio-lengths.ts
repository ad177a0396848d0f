/**
 * How much audio the model produced for its recent assistant items, and which item it produced
 * last: a truncation may not go beyond the audio of an item (the provider refuses it), and a
 * barge-in cuts the last item (test/integration/realtime/barge-in.test.ts).
 */
import { audioMs, type AudioFormat } from './realtime-session.ts';

/** How many assistant items' audio lengths are remembered for truncation clamping. */
const TRACKED_AUDIO_ITEMS = 16;

export class AssistantAudioLengths {
  private readonly bytesByItem = new Map<string, number>();
  private last: string | undefined;

  /** The item audio came for last, until it is truncated. */
  get lastItem(): string | undefined {
    return this.last;
  }

  add(itemId: string, bytes: number): void {
    this.bytesByItem.set(itemId, (this.bytesByItem.get(itemId) ?? 0) + bytes);
    this.last = itemId;
    if (this.bytesByItem.size > TRACKED_AUDIO_ITEMS) {
      const oldest = this.bytesByItem.keys().next().value;
      if (oldest !== undefined) this.bytesByItem.delete(oldest);
    }
  }

  /** Milliseconds of audio received for the item; undefined when it is not (or no longer) known. */
  receivedMs(itemId: string, format: AudioFormat): number | undefined {
    const bytes = this.bytesByItem.get(itemId);
    return bytes === undefined ? undefined : audioMs(format, bytes);
  }

  /** The item was truncated: a later barge-in does not cut it again. */
  truncated(itemId: string): void {
    if (this.last === itemId) this.last = undefined;
  }
}
