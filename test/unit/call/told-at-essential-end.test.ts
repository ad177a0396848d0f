import { describe, expect, it } from 'vitest';
import { TOLD_TAIL_MS } from '../../../gateway/call/spoken-response.ts';
import { EPOCH_MS, settle, startCall, type CallHarness, type Speaking } from './call-harness.ts';

/** A call speaking one result of `ms` of audio in one item, streamed whole and done. */
async function speaking(ms: number): Promise<{ h: CallHarness; result: Speaking }> {
  const h = await startCall();
  const model = h.model();
  const result = h.speak('op_1');
  await settle();
  model.speak('resp_1', 'item_1', ms, model.lastHandle);
  model.done('resp_1');
  await settle();
  return { h, result };
}

describe('when a result plays to its essential end (all but its last TOLD_TAIL_MS)', () => {
  it('should report it told there, while the tail still plays, and not again at the last packet', async () => {
    const { h, result } = await speaking(3_000);
    await h.play(3_000 - TOLD_TAIL_MS - 20);
    expect(result.outcome).toBeUndefined();

    await h.play(20);
    expect(result.outcome).toEqual({
      status: 'completed',
      responseId: 'resp_1',
      firstAudioAt: EPOCH_MS,
      heardMs: 3_000 - TOLD_TAIL_MS,
    });
    expect(result.settledAt).toBe(3_000 - TOLD_TAIL_MS);
    expect(h.rtp.queued).toEqual(['item_1']);

    await h.play(TOLD_TAIL_MS);
    expect(h.rtp.queued).toEqual([]);
    expect(h.events.filter((e) => e.type === 'result_spoken')).toHaveLength(1);
    expect(h.errors).toEqual([]);
  });

  it('should report it told when the caller hangs up inside the tail', async () => {
    const { h, result } = await speaking(3_000);
    await h.play(2_900);
    h.dialog.callerHangsUp();
    await h.call.done;

    expect(result.outcome).toMatchObject({ status: 'completed', heardMs: 2_800 });
    expect(result.settledAt).toBe(2_800);
  });

  it('should report it not told when the caller hangs up before the essential end', async () => {
    const { h, result } = await speaking(3_000);
    await h.play(2_799);
    h.dialog.callerHangsUp();
    await h.call.done;

    expect(result.outcome).toMatchObject({ status: 'failed' });
    expect(result.settledAt).toBe(2_799);
  });
});

describe('when a result is shorter than TOLD_TAIL_MS', () => {
  it('should report it told as its first packet goes out once the response is done', async () => {
    const { h, result } = await speaking(150);
    await h.clock.advance(1_000);
    expect(result.outcome).toBeUndefined();

    await h.play(20);
    expect(result.outcome).toMatchObject({ status: 'completed', firstAudioAt: EPOCH_MS + 1_000 });
    expect(result.settledAt).toBe(1_000);
  });

  it('should report it told at the response done when its first packet went out before', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    model.speak('resp_1', 'item_1', 150, model.lastHandle);
    await h.play(60);
    expect(result.outcome).toBeUndefined();

    model.done('resp_1');
    await settle();
    expect(result.outcome).toMatchObject({ status: 'completed', heardMs: 60 });
    expect(result.settledAt).toBe(60);
  });
});

describe('when a result is spoken in several items', () => {
  it('should report it told at the essential end of its last item, not of the first', async () => {
    const h = await startCall();
    const model = h.model();
    const result = h.speak('op_1');
    await settle();
    const handle = model.lastHandle;
    model.speak('resp_1', 'item_1', 2_000, handle);
    handle?.markItem('item_2');
    model.emit({
      type: 'audio_delta',
      responseId: 'resp_1',
      itemId: 'item_2',
      audio: Buffer.alloc(3_000 * 8),
    });
    model.done('resp_1');
    await h.play(2_000);
    expect(h.rtp.queued).toEqual(['item_2']);
    expect(result.outcome).toBeUndefined();

    await h.play(3_000 - TOLD_TAIL_MS - 1);
    expect(result.outcome).toBeUndefined();
    await h.play(1);
    expect(result.outcome).toMatchObject({ status: 'completed', heardMs: 2_000 + 2_800 });
    expect(result.settledAt).toBe(4_800);
  });
});

describe('when the caller holds the call before the essential end', () => {
  it('should not report it told while the playout waits, and tell it once the essential part played after the resume', async () => {
    const { h, result } = await speaking(3_000);
    await h.play(1_000);
    h.dialog.reinviteFromCaller('recvonly');
    await settle();
    expect(h.call.phase).toBe('on_hold');

    // Nothing goes out in the hold: past the time the essential end was due, it is not told.
    await h.play(5_000);
    expect(result.outcome).toBeUndefined();

    h.dialog.reinviteFromCaller('sendrecv');
    await settle();
    const resumedAt = h.clock.now();
    await h.play(1_800 - 20);
    expect(result.outcome).toBeUndefined();
    await h.play(20);
    expect(result.outcome).toMatchObject({ status: 'completed', heardMs: 2_800 });
    // Looked at again when the rest could have gone out: at most a packet late.
    expect(result.settledAt).toBeGreaterThanOrEqual(resumedAt + 1_800);
    expect(result.settledAt).toBeLessThanOrEqual(resumedAt + 1_800 + 20);
    expect(h.errors).toEqual([]);
  });

  it('should report it not told when the caller hangs up from that hold', async () => {
    const { h, result } = await speaking(3_000);
    await h.play(1_000);
    h.dialog.reinviteFromCaller('inactive');
    await settle();
    await h.clock.advance(5_000);
    h.dialog.callerHangsUp();
    await h.call.done;

    expect(result.outcome).toMatchObject({ status: 'failed', heardMs: 1_000 });
    expect(h.delivery.callEnded).toEqual([{ phase: 'hung_up', at: 6_000 }]);
  });
});
