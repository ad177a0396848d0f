import { describe, expect, it } from 'vitest';
import { EPOCH_MS, settle, startCall } from './call-harness.ts';

describe('when the caller barges in before the result response is done', () => {
  it('should report the result not told, at the response_done that follows the cut', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    const handle = model.lastHandle;
    expect(handle).toBeDefined();
    await h.clock.advance(300);
    model.speak('resp_1', 'item_1', 4_000, handle);
    h.rtp.send(1_200);
    await h.clock.advance(1_200);

    model.emit({
      type: 'speech_started',
      itemId: 'user_1',
      audioStartMs: 0,
      interruption: { itemId: 'item_1', playedMs: 1_200, cancelSent: true },
    });
    await settle();
    // The playout is cleared at once; the outcome waits for the model's end of the response.
    expect(h.rtp.queued).toEqual([]);
    expect(result.outcome).toBeUndefined();

    await h.clock.advance(150);
    model.done('resp_1', 'cancelled');
    await settle();
    expect(result.outcome).toEqual({
      status: 'cancelled',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS + 300,
      heardMs: 1_200,
    });
    expect(result.settledAt).toBe(1_650);
    expect(h.events).toContainEqual({
      type: 'barge_in',
      itemId: 'item_1',
      playedMs: 1_200,
      droppedMs: 2_800,
    });
    expect(h.errors).toEqual([]);
  });
});
