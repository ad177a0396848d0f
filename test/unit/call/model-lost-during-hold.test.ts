import { describe, expect, it } from 'vitest';
import { settle, startCall } from './call-harness.ts';

describe('when the model session is lost while the caller holds the call', () => {
  it('should keep the gate seeing the hold through the re-open, and come back on hold', async () => {
    const h = await startCall();
    const lost = h.model();
    h.dialog.reinviteFromCaller('recvonly');
    await settle();
    expect(h.call.phase).toBe('on_hold');

    lost.emit({ type: 'disconnected', reason: 'network', detail: 'connection reset' });
    // The re-open is under way: the phase says so, and the hold still reaches the gate.
    expect(h.call.phase).toBe('reopening');
    expect(h.gateSeesHold()).toBe(true);
    await settle();

    expect(h.sessions).toHaveLength(2);
    expect(h.call.phase).toBe('on_hold');
    expect(h.gateSeesHold()).toBe(true);
    const phases = h.events.flatMap((e) =>
      e.type === 'phase_changed' ? [`${e.from}->${e.to} (${e.cause})`] : [],
    );
    expect(phases.slice(-3)).toEqual([
      'live->on_hold (caller_held)',
      'on_hold->reopening (model_lost)',
      'reopening->on_hold (model_reopened)',
    ]);

    h.dialog.reinviteFromCaller('sendrecv');
    await settle();
    expect(h.call.phase).toBe('live');
    expect(h.gateSeesHold()).toBe(false);
    expect(h.errors).toEqual([]);
  });
});
