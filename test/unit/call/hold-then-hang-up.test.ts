import { describe, expect, it } from 'vitest';
import { settle, startCall } from './call-harness.ts';

describe('when the caller hangs up from a hold while a result waits in the playout', () => {
  it('should report the result not told, and only then tell delivery the caller hung up (out of band)', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 2_000, model.lastHandle);
    model.done('resp_1');
    h.dialog.reinviteFromCaller('inactive');
    await settle();
    expect(h.gateSeesHold()).toBe(true);

    await h.clock.advance(10_000);
    h.dialog.callerHangsUp();
    await h.call.done;

    expect(result.outcome).toEqual({ status: 'failed', responseId: 'resp_1', heardMs: 0 });
    expect(result.settledAt).toBe(10_000);
    expect(h.delivery.callEnded).toEqual([{ phase: 'hung_up', at: 10_000 }]);
    const phases = h.events.flatMap((e) =>
      e.type === 'phase_changed' ? [`${e.from}->${e.to}`] : [],
    );
    expect(phases).toEqual([
      'opening_model->answering',
      'answering->live',
      'live->on_hold',
      'on_hold->ending',
      'ending->ended',
    ]);
    expect(h.events.at(-1)).toEqual({
      type: 'ended',
      reason: 'caller_hung_up',
      dialogReason: 'remote-bye',
    });
    expect(model.closed).toBe(true);
    expect(h.rtp.closed).toBe(true);
    expect(h.errors).toEqual([]);
  });
});
