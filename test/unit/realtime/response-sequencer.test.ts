import { describe, expect, it } from 'vitest';
import { ResponseSequencer } from '../../../gateway/realtime/response-sequencer.ts';
import type { ResponseRequest } from '../../../gateway/realtime/realtime-session.ts';
import { FakeMediaTimer } from '../media/fake-media-timer.ts';

function harness(options: { autoRespondToTools?: boolean; maxQueued?: number } = {}) {
  const wire: string[] = [];
  const creates: ResponseRequest[] = [];
  let n = 0;
  const sequencer = new ResponseSequencer({
    sendCreate: (request) => {
      n += 1;
      creates.push(request);
      wire.push(`create:${n}`);
      return `ev${n}`;
    },
    sendCancel: (responseId) => wire.push(`cancel:${responseId}`),
    timer: new FakeMediaTimer(),
    ...options,
  });
  return { sequencer, wire, creates };
}

describe('when several responses are requested at once', () => {
  it('should send one create and hold the others until the active response is done', () => {
    const { sequencer, wire } = harness();
    sequencer.request({ instructions: 'a' });
    sequencer.request({ instructions: 'b' });
    sequencer.request({ instructions: 'c' });
    expect(wire).toEqual(['create:1']);
    sequencer.onResponseCreated('r1');
    expect(wire).toEqual(['create:1']);
    sequencer.onResponseDone('r1', 'completed', []);
    expect(wire).toEqual(['create:1', 'create:2']);
    sequencer.onResponseCreated('r2');
    sequencer.onResponseDone('r2', 'completed', []);
    expect(wire).toEqual(['create:1', 'create:2', 'create:3']);
  });

  it('should keep the order of requests', () => {
    const { sequencer, creates } = harness();
    for (const instructions of ['a', 'b']) sequencer.request({ instructions });
    sequencer.onResponseCreated('r1');
    sequencer.onResponseDone('r1', 'completed', []);
    expect(creates.map((c) => c.instructions)).toEqual(['a', 'b']);
  });

  it('should refuse requests beyond the queue bound', () => {
    const { sequencer } = harness({ maxQueued: 2 });
    expect(sequencer.request({}).end).toBeUndefined();
    expect(sequencer.request({}).end).toBeUndefined();
    expect(sequencer.request({}).end).toBeUndefined();
    expect(sequencer.request({}).end).toEqual({ type: 'refused', reason: 'busy' });
  });
});

describe('when the server started a response on its own', () => {
  it('should wait for that response before sending a create', () => {
    const { sequencer, wire } = harness();
    sequencer.onResponseCreated('server-r');
    sequencer.request({});
    expect(wire).toEqual([]);
    sequencer.onResponseDone('server-r', 'completed', []);
    expect(wire).toEqual(['create:1']);
  });

  it('should queue a refused create again and send it after the active response is done', () => {
    const { sequencer, wire, creates } = harness();
    sequencer.request({ instructions: 'mine' });
    // The server's own response.created arrives first; then the refusal of our create.
    sequencer.onResponseCreated('server-r');
    expect(sequencer.onCreateRefused('ev1')).toBeUndefined();
    expect(wire).toEqual(['create:1']);
    sequencer.onResponseDone('server-r', 'completed', []);
    expect(wire).toEqual(['create:1', 'create:2']);
    expect(creates[1]?.instructions).toBe('mine');
  });

  it('should drop a request refused too many times, and give it back so its owner can be told', () => {
    const { sequencer } = harness();
    const handle = sequencer.request({ instructions: 'op_1' });
    expect(sequencer.onCreateRefused('ev1')).toBeUndefined();
    sequencer.retry();
    expect(sequencer.onCreateRefused('ev2')).toBeUndefined();
    sequencer.retry();
    expect(sequencer.onCreateRefused('ev3')).toBe(handle);
    expect(handle.end).toEqual({ type: 'refused', reason: 'refused' });
    expect(sequencer.isActive).toBe(false);
    expect(sequencer.queuedCount).toBe(0);
  });

  it('should give up a create that failed, hand it back once, and send the next request', () => {
    const { sequencer, wire } = harness();
    const a = sequencer.request({ instructions: 'a' });
    sequencer.request({ instructions: 'b' });
    expect(sequencer.onCreateFailed('ev1')).toBe(a);
    expect(wire).toEqual(['create:1', 'create:2']);
    // A late answer about the first create changes nothing.
    expect(sequencer.onCreateFailed('ev1')).toBeUndefined();
    expect(sequencer.onCreateRefused('ev1')).toBeUndefined();
    expect(sequencer.awaitingCreated).toBe(true);
  });

  it('should not give up a request refused because of responses the server started, however many', () => {
    const { sequencer, wire } = harness();
    sequencer.request({ instructions: 'op_1' });
    for (let n = 1; n <= 6; n++) {
      // The caller spoke again: the server's own response is seen, then our create is refused.
      sequencer.onResponseCreated(`r_server_${n}`, false);
      expect(sequencer.onCreateRefused(`ev${n}`)).toBeUndefined();
      sequencer.onResponseDone(`r_server_${n}`, 'completed', []);
      expect(wire).toHaveLength(n + 1);
    }
    sequencer.onResponseCreated('r_ours');
    expect(sequencer.activeResponseId).toBe('r_ours');
  });

  it('should ignore a refusal of an event it did not send last', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    expect(sequencer.onCreateRefused('unrelated')).toBeUndefined();
    sequencer.onResponseDone('r1', 'completed', []);
    expect(wire).toEqual(['create:1']);
  });
});

describe('when a response dispatched two function calls', () => {
  const orders: [string, string[]][] = [
    ['outputs after done, in call order', ['done', 'out:a', 'out:b']],
    ['outputs after done, in reverse order', ['done', 'out:b', 'out:a']],
    ['both outputs before done', ['out:a', 'out:b', 'done']],
    ['one output before done and one after', ['out:b', 'done', 'out:a']],
  ];
  it.each(orders)('should send exactly one follow-up create with %s', (_name, steps) => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onFunctionCall('r1', 'a');
    sequencer.onFunctionCall('r1', 'b');
    for (const step of steps) {
      if (step === 'done') sequencer.onResponseDone('r1', 'completed', ['a', 'b']);
      else sequencer.onToolOutput(step.slice(4));
    }
    expect(wire).toEqual(['create:1', 'create:2']);
  });

  it('should ignore an output for a call it never saw', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onResponseDone('r1', 'completed', []);
    sequencer.onToolOutput('unknown');
    expect(wire).toEqual(['create:1']);
  });

  it('should not send the follow-up while one call has no output', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onResponseDone('r1', 'completed', ['a', 'b']);
    sequencer.onToolOutput('a');
    expect(wire).toEqual(['create:1']);
  });

  it('should not follow up a dispatching response that was cancelled', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onResponseDone('r1', 'cancelled', ['a']);
    sequencer.onToolOutput('a');
    expect(wire).toEqual(['create:1']);
  });

  it('should not follow up when auto-respond is off', () => {
    const { sequencer, wire } = harness({ autoRespondToTools: false });
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onResponseDone('r1', 'completed', ['a']);
    sequencer.onToolOutput('a');
    expect(wire).toEqual(['create:1']);
  });

  it('should put the follow-up ahead of requests queued meanwhile', () => {
    const { sequencer, creates } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.request({ instructions: 'later' });
    sequencer.onFunctionCall('r1', 'a');
    sequencer.onToolOutput('a');
    sequencer.onResponseDone('r1', 'completed', ['a']);
    expect(creates.map((c) => c.instructions)).toEqual([undefined, undefined]);
    sequencer.onResponseCreated('r2');
    sequencer.onResponseDone('r2', 'completed', []);
    expect(creates.map((c) => c.instructions)).toEqual([undefined, undefined, 'later']);
  });

  it('should let other requests through while the tools still run', () => {
    const { sequencer, creates } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.request({ instructions: 'meanwhile' });
    sequencer.onResponseDone('r1', 'completed', ['a']);
    expect(creates.map((c) => c.instructions)).toEqual([undefined, 'meanwhile']);
    sequencer.onToolOutput('a');
    expect(creates).toHaveLength(2);
    sequencer.onResponseCreated('r2');
    sequencer.onResponseDone('r2', 'completed', []);
    expect(creates.map((c) => c.instructions)).toEqual([undefined, 'meanwhile', undefined]);
  });
});

describe('when the caller is speaking', () => {
  it('should hold creates until the caller stops', () => {
    const { sequencer, wire } = harness();
    sequencer.onSpeechStarted();
    sequencer.request({});
    expect(wire).toEqual([]);
    sequencer.onSpeechStopped();
    expect(wire).toEqual(['create:1']);
  });
});

describe('when a cancel is asked for', () => {
  it('should cancel the active response by id', () => {
    const { sequencer, wire } = harness();
    sequencer.onResponseCreated('r1');
    expect(sequencer.cancelActive()).toEqual({ responseId: 'r1' });
    expect(wire).toEqual(['cancel:r1']);
  });

  it('should cancel an unanswered create as soon as it is created', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    expect(sequencer.cancelActive()).toEqual({ deferred: true });
    sequencer.onResponseCreated('r1');
    expect(wire).toEqual(['create:1', 'cancel:r1']);
  });

  it('should do nothing when no response is active', () => {
    const { sequencer, wire } = harness();
    expect(sequencer.cancelActive()).toBeUndefined();
    expect(wire).toEqual([]);
  });
});

describe('when the session stopped', () => {
  it('should send nothing more', () => {
    const { sequencer, wire } = harness();
    sequencer.stop();
    sequencer.request({});
    sequencer.onToolOutput('a');
    expect(wire).toEqual([]);
  });
});

describe('when the active response goes silent', () => {
  it('should stop waiting for it and send the next create', () => {
    const { sequencer, wire } = harness();
    sequencer.onResponseCreated('lost');
    sequencer.request({});
    expect(wire).toEqual([]);
    sequencer.onResponseStalled('other');
    expect(wire).toEqual([]);
    sequencer.onResponseStalled('lost');
    expect(wire).toEqual(['create:1']);
  });
});

describe('when the server starts a response of its own while our create is out', () => {
  it('should treat it as the active response, not cancel it for us, and send our request again once refused and done', () => {
    const { sequencer, wire, creates } = harness();
    sequencer.request({ instructions: 'ours' });
    expect(wire).toEqual(['create:1']);
    // The caller barged in while our create was unanswered: the cancel waits for our response.
    expect(sequencer.cancelActive()).toEqual({ deferred: true });
    sequencer.onResponseCreated('r_server', false);
    expect(sequencer.activeResponseId).toBe('r_server');
    // The deferred cancel belonged to our create: the server's response is not cancelled.
    expect(wire).toEqual(['create:1']);
    expect(sequencer.onCreateRefused('ev1')).toBeUndefined();
    expect(wire).toEqual(['create:1']);
    sequencer.onResponseDone('r_server', 'completed', []);
    expect(wire).toEqual(['create:1', 'create:2']);
    expect(creates.map((c) => c.instructions)).toEqual(['ours', 'ours']);
  });

  it('should keep our request when the server response is done before the refusal arrives', () => {
    const { sequencer, wire } = harness();
    sequencer.request({ instructions: 'ours' });
    sequencer.onResponseCreated('r_server', false);
    sequencer.onResponseDone('r_server', 'completed', []);
    expect(wire).toEqual(['create:1']);
    expect(sequencer.onCreateRefused('ev1')).toBeUndefined();
    sequencer.retry();
    expect(wire).toEqual(['create:1', 'create:2']);
  });

  it('should take a created that is ours as answering the create, as before', () => {
    const { sequencer, wire } = harness();
    sequencer.request({});
    expect(sequencer.cancelActive()).toEqual({ deferred: true });
    sequencer.onResponseCreated('r1', true);
    expect(wire).toEqual(['create:1', 'cancel:r1']);
  });
});
