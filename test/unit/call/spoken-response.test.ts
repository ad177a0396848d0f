import { describe, expect, it } from 'vitest';
import type { SpokenOutcome } from '../../../agents/result-delivery.ts';
import { SpokenResponse, TOLD_TAIL_MS } from '../../../gateway/call/spoken-response.ts';
import { RequestedResponse } from '../../../gateway/realtime/response-handle.ts';

function manualClock(start = 1_000): { now: () => number; advance: (ms: number) => void } {
  let at = start;
  return { now: () => at, advance: (ms) => (at += ms) };
}

/** The outcome if it has settled by now (microtasks flushed), else 'pending'. */
async function outcomeNow(spoken: SpokenResponse): Promise<SpokenOutcome | 'pending'> {
  return Promise.race([
    spoken.outcome,
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), 0)),
  ]);
}

function streamed(clock: { now: () => number }): SpokenResponse {
  const handle = new RequestedResponse();
  const spoken = new SpokenResponse({ operationId: 'op_1', handle, now: clock.now });
  handle.markCreated('resp_1');
  spoken.queued('item_1', 8_000);
  return spoken;
}

describe('when the model is done with a result response before its audio has played out', () => {
  it('should not settle at response.done, and settle completed when the last packet went out', async () => {
    const clock = manualClock();
    const spoken = streamed(clock);
    clock.advance(40);
    spoken.sent('item_1');
    spoken.done('completed');
    expect(await outcomeNow(spoken)).toBe('pending');
    expect(spoken.progress).toEqual({ type: 'playing', heardMs: 0 });
    clock.advance(8_000);
    spoken.finished('item_1', 8_000);
    expect(await outcomeNow(spoken)).toEqual({
      status: 'completed',
      responseId: 'resp_1',
      firstAudioAt: 1_040,
      heardMs: 8_000,
    });
  });

  it('should settle cancelled when the caller barges in while the rest is still queued', async () => {
    const clock = manualClock();
    const spoken = streamed(clock);
    spoken.sent('item_1');
    spoken.done('completed');
    clock.advance(3_900);
    spoken.interrupted({ itemId: 'item_1', sentMs: 3_900 });
    expect(spoken.progress).toEqual({
      type: 'interrupted',
      itemId: 'item_1',
      atMs: 3_900,
      heardMs: 3_900,
    });
    expect(await outcomeNow(spoken)).toMatchObject({
      status: 'cancelled',
      responseId: 'resp_1',
      heardMs: 3_900,
    });
    // A late end of the cut item changes nothing.
    spoken.finished('item_1', 3_900);
    expect((await spoken.outcome).status).toBe('cancelled');
  });

  it('should cut it even when another response was playing at the clear (its own item queued behind)', async () => {
    const spoken = streamed(manualClock());
    spoken.done('completed');
    spoken.interrupted({ itemId: 'item_other', sentMs: 500 });
    expect(await outcomeNow(spoken)).toMatchObject({ status: 'cancelled', heardMs: 0 });
  });
});

describe('when the caller barges in before the model is done', () => {
  it('should settle at the done, as cancelled, whatever status the model gives it', async () => {
    const spoken = streamed(manualClock());
    spoken.sent('item_1');
    spoken.interrupted({ itemId: 'item_1', sentMs: 1_200 });
    expect(await outcomeNow(spoken)).toBe('pending');
    spoken.done('completed');
    expect(await outcomeNow(spoken)).toMatchObject({ status: 'cancelled', heardMs: 1_200 });
  });
});

describe('when a clear finds the result response already played out', () => {
  it('should stay completed', async () => {
    const spoken = streamed(manualClock());
    spoken.sent('item_1');
    spoken.finished('item_1', 2_000);
    spoken.done('completed');
    spoken.interrupted({ itemId: 'item_next', sentMs: 100 });
    expect(await outcomeNow(spoken)).toMatchObject({ status: 'completed', heardMs: 2_000 });
  });
});

describe('when the model ends the response cancelled or failed', () => {
  it.each(['cancelled', 'failed'] as const)(
    'should settle %s at once, queued audio or not',
    async (status) => {
      const spoken = streamed(manualClock());
      spoken.done(status);
      expect(await outcomeNow(spoken)).toMatchObject({ status, responseId: 'resp_1' });
    },
  );
});

describe('when the audio is queued but no packet has gone out (the caller holds the call)', () => {
  it('should have no first audio and stay unsettled until it plays', async () => {
    const clock = manualClock();
    const spoken = streamed(clock);
    spoken.done('completed');
    expect(spoken.progress).toEqual({ type: 'queued' });
    clock.advance(30_000);
    expect(await outcomeNow(spoken)).toBe('pending');
    spoken.sent('item_1');
    spoken.finished('item_1', 1_000);
    expect(await outcomeNow(spoken)).toMatchObject({ status: 'completed', firstAudioAt: 31_000 });
  });
});

describe('when the response is given up (session lost, call ended, timeout)', () => {
  it('should settle failed once, and ignore what comes after', async () => {
    const spoken = streamed(manualClock());
    spoken.fail();
    spoken.done('completed');
    spoken.finished('item_1', 1_000);
    expect(await spoken.outcome).toMatchObject({ status: 'failed', heardMs: 0 });
  });
});

describe('when a packet of an item of another response goes out', () => {
  it("should not count it as this response's first audio", async () => {
    const clock = manualClock();
    const spoken = streamed(clock);
    spoken.sent('item_other');
    spoken.finished('item_other', 500);
    clock.advance(100);
    spoken.sent('item_1');
    spoken.done('completed');
    spoken.finished('item_1', 700);
    expect(await spoken.outcome).toMatchObject({
      status: 'completed',
      firstAudioAt: 1_100,
      heardMs: 700,
    });
  });
});

describe('when the request for a result response is refused', () => {
  it('should settle failed at once, with nothing heard', async () => {
    const handle = new RequestedResponse();
    const spoken = new SpokenResponse({ operationId: 'op_1', handle, now: () => 1_000 });
    handle.markRefused('busy');
    expect(await outcomeNow(spoken)).toEqual({ status: 'failed', heardMs: 0 });
  });

  it('should settle failed when bound to a handle already refused', async () => {
    const handle = new RequestedResponse();
    handle.markRefused('not_connected');
    const spoken = new SpokenResponse({ operationId: 'op_1', handle, now: () => 1_000 });
    expect(await outcomeNow(spoken)).toEqual({ status: 'failed', heardMs: 0 });
  });
});

describe('when the essential part of a result (all but its last TOLD_TAIL_MS) has gone out', () => {
  it('should know its essential end only once the model is done and the last item started', () => {
    const spoken = streamed(manualClock());
    expect(spoken.essentialEnd).toBeUndefined();
    spoken.done('completed');
    expect(spoken.essentialEnd).toBeUndefined();
    spoken.sent('item_1');
    expect(spoken.essentialEnd).toEqual({ itemId: 'item_1', atMs: 8_000 - TOLD_TAIL_MS });
  });

  it('should settle completed at the essential end, with what was sent', async () => {
    const spoken = streamed(manualClock());
    spoken.sent('item_1');
    spoken.done('completed');
    spoken.progressed('item_1', 8_000 - TOLD_TAIL_MS - 1);
    expect(await outcomeNow(spoken)).toBe('pending');
    spoken.progressed('item_1', 8_000 - TOLD_TAIL_MS);
    expect(await outcomeNow(spoken)).toMatchObject({ status: 'completed', heardMs: 7_800 });
    // The tail cut afterwards changes nothing.
    spoken.interrupted({ itemId: 'item_1', sentMs: 7_900 });
    expect((await spoken.outcome).status).toBe('completed');
  });

  it('should not settle on progress before the model is done, nor after a cut', async () => {
    const early = streamed(manualClock());
    early.sent('item_1');
    early.progressed('item_1', 7_900);
    expect(await outcomeNow(early)).toBe('pending');

    const cut = streamed(manualClock());
    cut.sent('item_1');
    cut.done('completed');
    cut.interrupted({ itemId: 'item_1', sentMs: 7_799 });
    expect(cut.essentialEnd).toBeUndefined();
    cut.progressed('item_1', 7_900);
    expect(await outcomeNow(cut)).toMatchObject({ status: 'cancelled', heardMs: 7_799 });
  });

  it('should place the essential end in the last item, at 0 ms when it is shorter than the tail', () => {
    const spoken = streamed(manualClock());
    spoken.queued('item_2', 150);
    spoken.done('completed');
    spoken.sent('item_1');
    expect(spoken.essentialEnd).toBeUndefined();
    spoken.finished('item_1', 8_000);
    spoken.sent('item_2');
    expect(spoken.essentialEnd).toEqual({ itemId: 'item_2', atMs: 0 });
  });

  it('should have no essential end when the model ended it cancelled', () => {
    const spoken = streamed(manualClock());
    spoken.sent('item_1');
    spoken.done('cancelled');
    expect(spoken.essentialEnd).toBeUndefined();
  });
});
