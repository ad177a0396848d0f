import { describe, expect, it } from 'vitest';
import { DELIVERY_TIMEOUT_MS } from '../../../gateway/call/delivery-port.ts';
import { EPOCH_MS, settle, startCall } from './call-harness.ts';

describe('when the caller holds the call while a result is being spoken, and resumes', () => {
  it('should let the gate see the hold, keep the result waiting past the delivery bound, and report it told after the resume', async () => {
    const h = await startCall();
    const model = h.model();
    expect(h.call.phase).toBe('live');
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 2_000, model.lastHandle);
    model.done('resp_1');
    h.rtp.send(500);
    await h.clock.advance(500);

    h.dialog.reinviteFromCaller('recvonly');
    await settle();
    expect(h.call.phase).toBe('on_hold');
    expect(h.gateSeesHold()).toBe(true);
    expect(h.events).toContainEqual({
      type: 'phase_changed',
      from: 'live',
      to: 'on_hold',
      cause: 'caller_held',
    });
    // Nothing goes out in the hold; the bound starts again rather than fail the result unheard.
    h.rtp.send(1_500);
    await h.clock.advance(DELIVERY_TIMEOUT_MS + 15_000);
    expect(result.outcome).toBeUndefined();

    const resumeAt = h.clock.now();
    h.dialog.reinviteFromCaller('sendrecv');
    await settle();
    expect(h.call.phase).toBe('live');
    expect(h.gateSeesHold()).toBe(false);
    expect(h.call.agent.resumedAt).toBe(EPOCH_MS + resumeAt);
    // The resume offers held results at once.
    expect(h.delivery.idleAt).toContain(resumeAt);

    h.rtp.sendAll();
    await h.clock.advance(1_500);
    expect(result.outcome).toMatchObject({
      status: 'completed',
      responseId: 'resp_1',
      heardMs: 2_000,
    });
    expect(result.settledAt).toBe(resumeAt);
    expect(h.errors).toEqual([]);
  });
});
