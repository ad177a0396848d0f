import { describe, expect, it } from 'vitest';
import {
  REFUSED_CREATE_RETRY_MS,
  RESPONSE_CREATED_TIMEOUT_MS,
  RESPONSE_STALL_TIMEOUT_MS,
  ResponseSequencer,
  type GiveUpReason,
} from '../../../gateway/realtime/response-sequencer.ts';
import type { ResponseHandle } from '../../../gateway/realtime/realtime-session.ts';
import { FakeMediaTimer } from '../media/fake-media-timer.ts';

interface GiveUp {
  responseId: string;
  reason: GiveUpReason;
  callIds: readonly string[];
  /** What the sequencer named active while the call layer was told. */
  activeWhenTold: string | undefined;
}

function harness() {
  const clock = new FakeMediaTimer();
  const wire: string[] = [];
  const tags: string[] = [];
  const givenUp: GiveUp[] = [];
  const timedOut: (ResponseHandle | undefined)[] = [];
  const timerErrors: string[] = [];
  let n = 0;
  const sequencer: ResponseSequencer = new ResponseSequencer({
    timer: clock,
    sendCreate: (_request, createTag) => {
      n += 1;
      wire.push(`create:${n}`);
      tags.push(createTag);
      return `ev${n}`;
    },
    sendCancel: (responseId) => wire.push(`cancel:${responseId}`),
    onGiveUp: (responseId, reason, callIds) =>
      givenUp.push({ responseId, reason, callIds, activeWhenTold: sequencer.activeResponseId }),
    onCreateTimeout: (dropped) => timedOut.push(dropped),
    onTimerError: (what) => timerErrors.push(what),
  });
  return { clock, sequencer, wire, tags, givenUp, timedOut, timerErrors };
}

describe('when our create gets no response.created', () => {
  it('should give it up at its bound, hand the request back once, and send the next one', () => {
    const { clock, sequencer, wire, timedOut } = harness();
    const a = sequencer.request({ instructions: 'a' });
    sequencer.request({ instructions: 'b' });
    clock.advance(RESPONSE_CREATED_TIMEOUT_MS - 1);
    expect(timedOut).toEqual([]);
    clock.advance(1);
    expect(timedOut).toEqual([a]);
    expect(a.end).toEqual({ type: 'refused', reason: 'timeout' });
    expect(wire).toEqual(['create:1', 'create:2']);
    expect(sequencer.awaitingCreated).toBe(true);
  });

  it('should not time out a create its response.created answered', () => {
    const { clock, sequencer, timedOut } = harness();
    const a = sequencer.request({ instructions: 'a' });
    sequencer.onResponseCreated('r1');
    expect(a.responseId).toBe('r1');
    clock.advance(RESPONSE_CREATED_TIMEOUT_MS * 2);
    expect(timedOut).toEqual([]);
    expect(sequencer.activeResponseId).toBe('r1');
  });

  it('should keep waiting for our own created while the server runs a response of its own', () => {
    const { clock, sequencer, tags, timedOut } = harness();
    const ours = sequencer.request({ instructions: 'ours' });
    sequencer.onResponseCreated('r_server', false);
    expect(ours.responseId).toBeUndefined();
    expect(sequencer.pendingCreateTag).toBe(tags[0]);
    clock.advance(RESPONSE_CREATED_TIMEOUT_MS);
    expect(timedOut).toEqual([ours]);
    expect(sequencer.pendingCreateTag).toBeUndefined();
    // The server's response is still the active one.
    expect(sequencer.activeResponseId).toBe('r_server');
  });

  it('should tag each create apart, so that response.created tells whose it is', () => {
    const { sequencer, tags } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.request({});
    sequencer.onResponseDone('r1', 'completed', []);
    expect(tags).toHaveLength(2);
    expect(new Set(tags).size).toBe(2);
    expect(sequencer.pendingCreateTag).toBe(tags[1]);
  });
});

describe('when a running response goes silent', () => {
  it('should cancel it at its stall bound and tell the call layer while it is still named active', () => {
    const { clock, sequencer, wire, givenUp } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r1');
    sequencer.onFunctionCall('r1', 'call_a');
    sequencer.request({ instructions: 'next' });
    clock.advance(RESPONSE_STALL_TIMEOUT_MS - 1);
    expect(givenUp).toEqual([]);
    clock.advance(1);
    expect(givenUp).toEqual([
      { responseId: 'r1', reason: 'stalled', callIds: ['call_a'], activeWhenTold: 'r1' },
    ]);
    // The cancel goes out before the next create.
    expect(wire).toEqual(['create:1', 'cancel:r1', 'create:2']);
    expect(sequencer.isRunning('r1')).toBe(false);
    expect(sequencer.hasSeen('r1')).toBe(true);
  });

  it('should count its bound from the last server event, not from its start', () => {
    const { clock, sequencer, givenUp } = harness();
    sequencer.onResponseCreated('r1');
    clock.advance(20_000);
    sequencer.onServerActivity();
    clock.advance(RESPONSE_STALL_TIMEOUT_MS - 1);
    expect(givenUp).toEqual([]);
    clock.advance(1);
    expect(givenUp.map((g) => [g.responseId, g.reason])).toEqual([['r1', 'stalled']]);
  });

  it('should end the bound with its done, and ignore a done after it was given up', () => {
    const { clock, sequencer, givenUp } = harness();
    sequencer.onResponseCreated('r1');
    clock.advance(1_000);
    expect(sequencer.isRunning('r1')).toBe(true);
    sequencer.onResponseDone('r1', 'completed', []);
    clock.advance(RESPONSE_STALL_TIMEOUT_MS * 2);
    expect(givenUp).toEqual([]);
    sequencer.onResponseCreated('r2');
    clock.advance(RESPONSE_STALL_TIMEOUT_MS);
    expect(givenUp.map((g) => g.responseId)).toEqual(['r2']);
    expect(sequencer.isRunning('r2')).toBe(false);
  });
});

describe('when a broken peer runs more responses at once than are tracked', () => {
  it('should give up the oldest as superseded and keep the newest active', () => {
    const { sequencer, wire, givenUp } = harness();
    for (const id of ['r1', 'r2', 'r3', 'r4', 'r5']) sequencer.onResponseCreated(id);
    expect(givenUp.map((g) => [g.responseId, g.reason, g.activeWhenTold])).toEqual([
      ['r1', 'superseded', 'r5'],
    ]);
    expect(wire).toEqual(['cancel:r1']);
    expect(sequencer.activeResponseId).toBe('r5');
  });
});

describe('when a create is refused with no response in sight', () => {
  it('should send it again after the retry delay', () => {
    const { clock, sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onCreateRefused('ev1');
    expect(sequencer.isActive).toBe(false);
    clock.advance(REFUSED_CREATE_RETRY_MS - 1);
    expect(wire).toEqual(['create:1']);
    clock.advance(1);
    expect(wire).toEqual(['create:1', 'create:2']);
  });

  it('should wait for the response in sight instead of retrying', () => {
    const { clock, sequencer, wire } = harness();
    sequencer.request({});
    sequencer.onResponseCreated('r_server', false);
    sequencer.onCreateRefused('ev1');
    clock.advance(REFUSED_CREATE_RETRY_MS * 4);
    expect(wire).toEqual(['create:1']);
    sequencer.onResponseDone('r_server', 'completed', []);
    expect(wire).toEqual(['create:1', 'create:2']);
  });
});

describe('when the session stopped', () => {
  it('should leave no timer to fire', () => {
    const { clock, sequencer, wire, givenUp, timedOut } = harness();
    sequencer.onResponseCreated('r1');
    sequencer.request({});
    sequencer.onResponseDone('r1', 'completed', []);
    sequencer.onResponseCreated('r2', false);
    sequencer.onCreateRefused('ev1');
    sequencer.stop();
    clock.advance(RESPONSE_STALL_TIMEOUT_MS * 10);
    expect(wire).toEqual(['create:1']);
    expect(givenUp).toEqual([]);
    expect(timedOut).toEqual([]);
    expect(sequencer.isActive).toBe(false);
  });
});

describe('when the call layer throws while told of a give-up', () => {
  it('should report the failure and still free the sequencer for the next create', () => {
    const clock = new FakeMediaTimer();
    const wire: string[] = [];
    const errors: string[] = [];
    const sequencer = new ResponseSequencer({
      timer: clock,
      sendCreate: () => {
        wire.push('create');
        return `ev${wire.length}`;
      },
      sendCancel: (responseId) => wire.push(`cancel:${responseId}`),
      onGiveUp: () => {
        throw new Error('listener failed');
      },
      onTimerError: (what) => errors.push(what),
    });
    sequencer.onResponseCreated('r1');
    sequencer.request({});
    clock.advance(RESPONSE_STALL_TIMEOUT_MS);
    expect(errors).toEqual(['response stall bound']);
    expect(wire).toEqual(['cancel:r1', 'create']);
    expect(sequencer.isRunning('r1')).toBe(false);
  });
});
