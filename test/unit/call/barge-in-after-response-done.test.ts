import { describe, expect, it } from 'vitest';
import { TOLD_TAIL_MS } from '../../../gateway/call/spoken-response.ts';
import { EPOCH_MS, settle, startCall } from './call-harness.ts';

describe('when the model finished streaming a result and the caller barges in while it still plays', () => {
  it('should report the result not told, at the barge-in, with what the caller heard', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    await h.clock.advance(200);
    // Realtime models stream faster than real time: 8 s of audio are done after 100 ms.
    model.speak('resp_1', 'item_1', 8_000, model.lastHandle);
    await h.clock.advance(100);
    model.done('resp_1');
    await settle();
    expect(result.outcome).toBeUndefined();

    h.rtp.send(3_900);
    await h.clock.advance(3_900);
    expect(result.outcome).toBeUndefined();
    model.emit({ type: 'speech_started', itemId: 'user_1', audioStartMs: 0 });
    await settle();

    expect(result.outcome).toEqual({
      status: 'cancelled',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS + 300,
      heardMs: 3_900,
    });
    expect(result.settledAt).toBe(4_200);
    expect(h.errors).toEqual([]);
  });

  it('should report the result told when the caller barges in inside its last TOLD_TAIL_MS', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 8_000, model.lastHandle);
    model.done('resp_1');
    await h.play(7_900);
    model.emit({ type: 'speech_started', itemId: 'user_1', audioStartMs: 0 });
    await settle();

    expect(result.outcome).toEqual({
      status: 'completed',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 8_000 - TOLD_TAIL_MS,
    });
    expect(result.settledAt).toBe(8_000 - TOLD_TAIL_MS);
    expect(h.events).toContainEqual(expect.objectContaining({ type: 'barge_in', playedMs: 7_900 }));
    expect(h.errors).toEqual([]);
  });

  it('should report the result not told when the caller barges in 1 ms before its essential end', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 8_000, model.lastHandle);
    model.done('resp_1');
    await h.play(8_000 - TOLD_TAIL_MS - 1);
    expect(result.outcome).toBeUndefined();
    model.emit({ type: 'speech_started', itemId: 'user_1', audioStartMs: 0 });
    await h.clock.advance(1_000);

    expect(result.outcome).toEqual({
      status: 'cancelled',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 7_799,
    });
    expect(result.settledAt).toBe(7_799);
    expect(h.errors).toEqual([]);
  });
});
