import { describe, expect, it } from 'vitest';
import { EPOCH_MS, settle, startCall } from './call-harness.ts';

describe('when the model session is about to expire while a result plays', () => {
  it('should wait for the playout to finish, report the result told, and then switch to the new session', async () => {
    const h = await startCall();
    const old = h.model();
    const result = h.speak('op_1');
    await settle();
    old.speak('resp_1', 'item_1', 2_000, old.lastHandle);
    old.done('resp_1');
    h.rtp.send(500);
    old.emit({ type: 'session_expiring', remainingMs: 120_000 });
    await settle();
    expect(h.call.phase).toBe('renewing');
    // Not quiet: the standby is not even opened while the result plays.
    expect(h.sessions).toHaveLength(1);

    await h.clock.advance(1_500);
    h.rtp.sendAll();
    await settle();
    expect(result.outcome).toMatchObject({
      status: 'completed',
      responseId: 'resp_1',
      heardMs: 2_000,
    });
    expect(result.settledAt).toBe(1_500);
    expect(h.sessions).toHaveLength(2);
    expect(h.model()).not.toBe(old);
    expect(old.closed).toBe(true);
    expect(h.call.phase).toBe('live');
    expect(h.events).toContainEqual({
      type: 'phase_changed',
      from: 'renewing',
      to: 'live',
      cause: 'model_renewed',
    });
    expect(h.errors).toEqual([]);
  });

  it('should cut the result at the forced switch, report it not told, and offer it again on the new session', async () => {
    const h = await startCall();
    const old = h.model();
    const result = h.speak('op_1');
    await settle();
    old.speak('resp_1', 'item_1', 60_000, old.lastHandle);
    old.done('resp_1');
    h.rtp.send(1_000);
    // Forced halfway through a short warning: after 20 s.
    old.emit({ type: 'session_expiring', remainingMs: 40_000 });
    await settle();
    h.rtp.send(19_000);
    await h.clock.advance(19_999);
    expect(result.outcome).toBeUndefined();
    expect(h.sessions).toHaveLength(1);

    await h.clock.advance(1);
    expect(h.sessions).toHaveLength(2);
    expect(result.outcome).toEqual({
      status: 'cancelled',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 20_000,
    });
    expect(result.settledAt).toBe(20_000);
    expect(h.call.phase).toBe('live');

    const offeredBefore = h.delivery.idleAt.length;
    await h.clock.advance(1_000);
    expect(h.delivery.idleAt.slice(offeredBefore)).toEqual([21_000]);
    // What is said now goes to the new session.
    h.speak('op_1');
    await settle();
    expect(h.model().systemMessages).toEqual(['result of op_1']);
    expect(h.model().lastHandle).toBeDefined();
    expect(old.systemMessages.filter((m) => m === 'result of op_1')).toHaveLength(1);
    expect(h.errors).toEqual([]);
  });
});
