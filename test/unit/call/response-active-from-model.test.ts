import { describe, expect, it } from 'vitest';
import { settle, startCall } from './call-harness.ts';

describe('when the gate asks whether the model is speaking', () => {
  it("should answer from the model session's active response, over by the time its done is handled", async () => {
    const h = await startCall();
    const model = h.model();
    const gateSeesResponse = (): boolean =>
      h.call.agent.snapshot('op_none', () => true).responseActive;
    expect(gateSeesResponse()).toBe(false);

    model.speak('resp_1', 'item_1', 1_000);
    expect(gateSeesResponse()).toBe(true);
    const idleBefore = h.delivery.idleAt.length;
    model.done('resp_1');
    await settle();
    expect(gateSeesResponse()).toBe(false);
    // The line went quiet at the response's done: delivery was told at once.
    expect(h.delivery.idleAt).toHaveLength(idleBefore + 1);
    expect(h.errors).toEqual([]);
  });

  it('should answer no once the model session was lost mid-response', async () => {
    const h = await startCall();
    const lost = h.model();
    lost.speak('resp_1', 'item_1', 1_000);
    expect(h.call.agent.responseActive).toBe(true);
    lost.emit({ type: 'disconnected', reason: 'network', detail: 'lost' });
    await settle();
    expect(h.model()).not.toBe(lost);
    expect(h.call.agent.responseActive).toBe(false);
  });
});

describe('when the model gives up the request of a result before creating its response', () => {
  it('should report the result not told at once, and offer it again shortly', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    const handle = model.lastHandle;
    expect(handle).toBeDefined();
    handle?.markRefused('refused');
    await settle();
    expect(result.outcome).toEqual({ status: 'failed', heardMs: 0 });
    const idleBefore = h.delivery.idleAt.length;
    await h.clock.advance(1_000);
    expect(h.delivery.idleAt.slice(idleBefore)).toEqual([1_000]);
    expect(h.errors).toEqual([]);
  });
});
