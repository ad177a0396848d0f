import { describe, expect, it } from 'vitest';
import { settle, startCall } from './call-harness.ts';

describe('when the same result is asked to be spoken again while its first response still plays', () => {
  it('should settle each on its own response: the first told when it played, the second not told when it was cut', async () => {
    const h = await startCall();
    const model = h.model();
    const first = h.speak('op_1');
    await settle();
    const firstHandle = model.lastHandle;
    model.speak('resp_1', 'item_1', 2_000, firstHandle);
    model.done('resp_1');
    h.rtp.send(500);
    await h.clock.advance(500);

    const duplicate = h.speak('op_1');
    await settle();
    const duplicateHandle = model.lastHandle;
    expect(duplicateHandle).not.toBe(firstHandle);
    model.speak('resp_2', 'item_2', 2_000, duplicateHandle);
    model.done('resp_2');

    h.rtp.sendAll();
    await h.clock.advance(1_500);
    expect(first.outcome).toMatchObject({
      status: 'completed',
      responseId: 'resp_1',
      heardMs: 2_000,
    });
    expect(first.settledAt).toBe(500);
    // The first response's playout says nothing about the second.
    expect(duplicate.outcome).toBeUndefined();

    model.emit({ type: 'speech_started', itemId: 'user_1', audioStartMs: 0 });
    await settle();
    expect(duplicate.outcome).toEqual({ status: 'cancelled', responseId: 'resp_2', heardMs: 0 });
    expect(duplicate.settledAt).toBe(2_000);
    expect(h.errors).toEqual([]);
  });
});
