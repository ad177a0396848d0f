import { describe, expect, it } from 'vitest';
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

  it('should report the result told only once its last packet went out, not at response_done', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 8_000, model.lastHandle);
    model.done('resp_1');
    h.rtp.send(7_980);
    await h.clock.advance(7_980);
    expect(result.outcome).toBeUndefined();

    h.rtp.sendAll();
    await h.clock.advance(20);
    expect(result.outcome).toEqual({
      status: 'completed',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 8_000,
    });
    expect(result.settledAt).toBe(7_980);
    expect(h.errors).toEqual([]);
  });
});
