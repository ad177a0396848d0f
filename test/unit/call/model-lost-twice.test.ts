import { describe, expect, it } from 'vitest';
import { settle, startCall } from './call-harness.ts';

describe('when the model session is lost a second time while a result plays', () => {
  it('should report the result not told, say goodbye, end the call, and only then hand over to delivery', async () => {
    const h = await startCall();
    h.model().emit({ type: 'disconnected', reason: 'network', detail: 'first loss' });
    await settle();
    expect(h.call.phase).toBe('live');
    const second = h.model();
    const result = h.speak('op_1');
    await settle();
    second.speak('resp_1', 'item_1', 3_000, second.lastHandle);
    second.done('resp_1');
    h.rtp.send(1_000);
    await h.clock.advance(1_000);

    second.emit({ type: 'disconnected', reason: 'network', detail: 'second loss' });
    await h.call.done;

    expect(h.sessions).toHaveLength(2);
    expect(result.outcome).toMatchObject({
      status: 'cancelled',
      responseId: 'resp_1',
      heardMs: 1_000,
    });
    expect(result.settledAt).toBe(1_000);
    expect(h.delivery.callEnded).toEqual([{ phase: 'hung_up', at: 1_000 }]);
    const phases = h.events.flatMap((e) =>
      e.type === 'phase_changed' ? [`${e.from}->${e.to}`] : [],
    );
    expect(phases).toEqual([
      'opening_model->answering',
      'answering->live',
      'live->reopening',
      'reopening->live',
      'live->saying_goodbye',
      'saying_goodbye->ending',
      'ending->ended',
    ]);
    expect(h.events.at(-1)).toEqual({ type: 'ended', reason: 'model_lost' });
    expect(h.errors).toEqual([]);
  });
});
