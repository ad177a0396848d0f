import { describe, expect, it } from 'vitest';
import type { ResponseEnd, ResponseHandle } from '../../../gateway/realtime/realtime-session.ts';
import {
  RESPONSE_CREATED_TIMEOUT_MS,
  RESPONSE_STALL_TIMEOUT_MS,
  ResponseSequencer,
} from '../../../gateway/realtime/response-sequencer.ts';
import { FakeMediaTimer } from '../media/fake-media-timer.ts';

function harness(options: { maxQueued?: number; autoRespondToTools?: boolean } = {}) {
  const clock = new FakeMediaTimer();
  const wire: string[] = [];
  const listenerErrors: unknown[] = [];
  let n = 0;
  const sequencer = new ResponseSequencer({
    timer: clock,
    sendCreate: () => {
      n += 1;
      wire.push(`create:${n}`);
      return `ev${n}`;
    },
    sendCancel: (responseId) => wire.push(`cancel:${responseId}`),
    onHandleListenerError: (error) => listenerErrors.push(error),
    ...options,
  });
  return { clock, sequencer, wire, listenerErrors };
}

/** Every settlement a handle reports, through its listeners and its promise. */
function watch(handle: ResponseHandle): { ends: ResponseEnd[]; created: string[] } {
  const ends: ResponseEnd[] = [];
  const created: string[] = [];
  handle.onCreated((responseId) => created.push(responseId));
  handle.onDone((end) => ends.push(end));
  handle.onRefused((reason) => ends.push({ type: 'refused', reason }));
  return { ends, created };
}

describe('when a requested response is created and done', () => {
  it('should report created with its id, each item once, and done with its status, once', async () => {
    const { sequencer } = harness();
    const handle = sequencer.request({ instructions: 'hello' });
    const seen = watch(handle);
    const items: string[] = [];
    handle.onItem((itemId) => items.push(itemId));
    expect(handle.responseId).toBeUndefined();

    sequencer.onResponseCreated('r1');
    sequencer.onOutputItem('r1', 'item_1');
    sequencer.onOutputItem('r1', 'item_1');
    sequencer.onOutputItem('r_other', 'item_x');
    sequencer.onOutputItem('r1', 'item_2');
    sequencer.onResponseDone('r1', 'completed', [], undefined);
    // A replayed done changes nothing.
    sequencer.onResponseDone('r1', 'failed', []);

    expect(seen.created).toEqual(['r1']);
    expect(items).toEqual(['item_1', 'item_2']);
    expect(handle.items).toEqual(['item_1', 'item_2']);
    expect(seen.ends).toEqual([{ type: 'done', responseId: 'r1', status: 'completed' }]);
    expect(await handle.ended).toEqual(seen.ends[0]);
  });

  it('should tell a listener added afterwards what already happened, at once', () => {
    const { sequencer } = harness();
    const handle = sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onOutputItem('r1', 'item_1');
    sequencer.onResponseDone('r1', 'cancelled', [], 'turn_detected');
    const items: string[] = [];
    handle.onItem((itemId) => items.push(itemId));
    const seen = watch(handle);
    expect(seen.created).toEqual(['r1']);
    expect(items).toEqual(['item_1']);
    expect(seen.ends).toEqual([
      { type: 'done', responseId: 'r1', status: 'cancelled', reason: 'turn_detected' },
    ]);
  });

  it('should answer only our request, not a response the server started itself meanwhile', () => {
    const { sequencer } = harness();
    const handle = sequencer.request({});
    sequencer.onResponseCreated('r_server', false);
    sequencer.onCreateRefused('ev1');
    sequencer.onResponseDone('r_server', 'completed', []);
    expect(handle.end).toBeUndefined();
    expect(handle.responseId).toBeUndefined();
    sequencer.onResponseCreated('r_ours');
    expect(handle.responseId).toBe('r_ours');
  });

  it('should keep one listener that throws from the others, and report it', () => {
    const { sequencer, listenerErrors } = harness();
    const handle = sequencer.request({});
    handle.onCreated(() => {
      throw new Error('listener broke');
    });
    const seen = watch(handle);
    sequencer.onResponseCreated('r1');
    expect(seen.created).toEqual(['r1']);
    expect(listenerErrors).toHaveLength(1);
    expect(sequencer.activeResponseId).toBe('r1');
  });
});

describe('when a request is cancelled before its response is created', () => {
  it('should cancel the response as soon as it is created, and end the handle done as cancelled', () => {
    const { sequencer, wire } = harness();
    const handle = sequencer.request({});
    const seen = watch(handle);
    expect(sequencer.cancelActive()).toEqual({ deferred: true });
    sequencer.onResponseCreated('r1');
    expect(wire).toEqual(['create:1', 'cancel:r1']);
    sequencer.onResponseDone('r1', 'cancelled', [], 'client_cancelled');
    expect(seen.created).toEqual(['r1']);
    expect(seen.ends).toEqual([
      { type: 'done', responseId: 'r1', status: 'cancelled', reason: 'client_cancelled' },
    ]);
  });
});

describe('when a request will get no response', () => {
  it('should refuse it at once as busy when the queue is full', () => {
    const { sequencer } = harness({ maxQueued: 1 });
    sequencer.request({});
    sequencer.request({});
    const third = sequencer.request({});
    expect(third.end).toEqual({ type: 'refused', reason: 'busy' });
  });

  it('should refuse it once when the provider refused it too often', () => {
    const { sequencer } = harness();
    const handle = sequencer.request({});
    const seen = watch(handle);
    for (let n = 1; n <= 3; n++) {
      sequencer.onCreateRefused(`ev${n}`);
      sequencer.retry();
    }
    expect(seen.ends).toEqual([{ type: 'refused', reason: 'refused' }]);
    // A late created for it does not revive it.
    sequencer.onResponseCreated('r_late');
    expect(handle.responseId).toBeUndefined();
    expect(seen.ends).toHaveLength(1);
  });

  it('should refuse it when the provider rejected it, and when it never answered', () => {
    const { clock, sequencer } = harness();
    const rejected = sequencer.request({});
    const silent = sequencer.request({});
    sequencer.onCreateFailed('ev1');
    expect(rejected.end).toEqual({ type: 'refused', reason: 'refused' });
    expect(silent.end).toBeUndefined();
    clock.advance(RESPONSE_CREATED_TIMEOUT_MS);
    expect(silent.end).toEqual({ type: 'refused', reason: 'timeout' });
  });

  it('should end a response given up at its stall bound as failed, with the reason', () => {
    const { clock, sequencer } = harness();
    const handle = sequencer.request({});
    sequencer.onResponseCreated('r1');
    clock.advance(RESPONSE_STALL_TIMEOUT_MS);
    expect(handle.end).toEqual({
      type: 'done',
      responseId: 'r1',
      status: 'failed',
      reason: 'stalled',
    });
  });
});

describe('when the session closes with requests pending', () => {
  it('should settle every handle exactly once: refused if not created, failed if running', () => {
    const { sequencer } = harness();
    const running = sequencer.request({});
    sequencer.onResponseCreated('r1');
    const inFlight = sequencer.request({});
    const queued = sequencer.request({});
    sequencer.onResponseDone('r1', 'completed', []);
    const done = running.end;
    const second = sequencer.request({});
    const watched = [inFlight, queued, second].map(watch);

    sequencer.stop();
    sequencer.stop();
    sequencer.onResponseCreated('r2');
    sequencer.onResponseDone('r2', 'completed', []);

    expect(running.end).toBe(done);
    expect(watched.map((seen) => seen.ends)).toEqual([
      [{ type: 'refused', reason: 'closed' }],
      [{ type: 'refused', reason: 'closed' }],
      [{ type: 'refused', reason: 'closed' }],
    ]);
    // Asked after the close: refused at once.
    expect(sequencer.request({}).end).toEqual({ type: 'refused', reason: 'closed' });
  });

  it('should end a running response as failed, closed', () => {
    const { sequencer } = harness();
    const handle = sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.stop();
    expect(handle.end).toEqual({
      type: 'done',
      responseId: 'r1',
      status: 'failed',
      reason: 'closed',
    });
  });
});

describe('when tool outputs are sent', () => {
  it('should give every output of a turn the handle of its one follow-up', () => {
    const { sequencer, wire } = harness();
    sequencer.onResponseCreated('r1', false);
    sequencer.onFunctionCall('r1', 'call_a');
    sequencer.onFunctionCall('r1', 'call_b');
    const a = sequencer.onToolOutput('call_a');
    sequencer.onResponseDone('r1', 'completed', ['call_a', 'call_b']);
    const b = sequencer.onToolOutput('call_b');
    expect(b).toBe(a);
    expect(wire).toEqual(['create:1']);
    // A response the server starts itself before the follow-up is created is not it.
    sequencer.onResponseCreated('r_server', false);
    sequencer.onCreateRefused('ev1');
    sequencer.onResponseDone('r_server', 'completed', []);
    expect(a.responseId).toBeUndefined();
    expect(wire).toEqual(['create:1', 'create:2']);
    sequencer.onResponseCreated('r_follow_up');
    expect(a.responseId).toBe('r_follow_up');
    sequencer.onResponseDone('r_follow_up', 'completed', []);
    expect(a.end).toMatchObject({ type: 'done', status: 'completed' });
  });

  it('should give the outputs of a cut turn the next response the server starts itself', () => {
    const { sequencer, wire } = harness();
    sequencer.onResponseCreated('r1', false);
    sequencer.onFunctionCall('r1', 'call_a');
    sequencer.onResponseDone('r1', 'cancelled', ['call_a']);
    const handle = sequencer.onToolOutput('call_a');
    expect(wire).toEqual([]);
    // Our own request's response is not the one that answers the caller's next turn.
    const ours = sequencer.request({});
    sequencer.onResponseCreated('r_ours');
    sequencer.onResponseDone('r_ours', 'completed', []);
    expect(ours.responseId).toBe('r_ours');
    expect(handle.responseId).toBeUndefined();
    sequencer.onResponseCreated('r_next_turn', false);
    expect(handle.responseId).toBe('r_next_turn');
  });

  it('should give an output of a call no turn knows the next response the server starts', () => {
    const { sequencer } = harness();
    const first = sequencer.onToolOutput('call_unknown');
    const second = sequencer.onToolOutput('call_unknown_too');
    expect(second).toBe(first);
    sequencer.onResponseCreated('r_server', false);
    expect(first.responseId).toBe('r_server');
  });

  it('should refuse a turn handle whose session closes before its follow-up is created', () => {
    const { sequencer } = harness({ autoRespondToTools: true });
    sequencer.onResponseCreated('r1', false);
    sequencer.onFunctionCall('r1', 'call_a');
    const handle = sequencer.onToolOutput('call_a');
    sequencer.stop();
    expect(handle.end).toEqual({ type: 'refused', reason: 'closed' });
  });
});
