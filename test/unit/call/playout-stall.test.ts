import { describe, expect, it } from 'vitest';
import { EPOCH_MS, settle, startCall } from './call-harness.ts';

describe('when the process stalls past rtp.stallCutMs while the agent speaks a result', () => {
  it('should cut the speech like a barge-in: result not told, response cancelled, item truncated at what was sent', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 6_000, model.lastHandle);
    h.rtp.send(2_500);
    await h.clock.advance(2_500);
    expect(result.outcome).toBeUndefined();

    h.rtp.stall(3_000);
    await settle();
    // The model confirms the cancel the call sent.
    expect(model.cancels).toBe(1);
    model.done('resp_1', 'cancelled');
    await settle();

    expect(result.outcome).toEqual({
      status: 'cancelled',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 2_500,
    });
    expect(model.truncated).toEqual([{ itemId: 'item_1', playedMs: 2_500 }]);
    expect(h.events.filter((e) => e.type === 'playout_stalled')).toEqual([
      { type: 'playout_stalled', gapMs: 3_000, itemId: 'item_1', sentMs: 2_500 },
    ]);
    expect(h.errors).toEqual([]);
  });
});
