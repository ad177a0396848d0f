import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf, waitFor } from './realtime-harness.ts';
import {
  CONFIG,
  connectScripted,
  protocolErrorCount,
  SESSION_WIRE,
  sleep,
  type ScriptedCall,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

/** A configure() whose settling the test can look at without awaiting it. */
function pending(promise: Promise<void>): { readonly settled: boolean; promise: Promise<void> } {
  const state = { settled: false, promise };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

const A = { ...CONFIG, instructions: 'You take table bookings.' };
const B = { ...CONFIG, instructions: 'You handle refunds.' };

describe('when a session.updated that answers another update arrives while configure() waits', () => {
  it('should keep waiting for the session.updated that carries its own configuration', async () => {
    call = await connectScripted(
      { answerSessionUpdate: false },
      { sessionUpdateTimeoutMs: 2_000 },
      false,
    );
    const c = call;
    const configuring = pending(c.client.configure(A));
    await waitFor('the update on the wire', () =>
      c.server.received.find((e) => e.type === 'session.update'),
    );
    c.server.send({
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: 'an older configuration' },
    });
    await sleep(150);
    expect(configuring.settled).toBe(false);
    c.server.send({
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: A.instructions },
    });
    await configuring.promise;
    expect(eventsOf(c.events, 'error')).toEqual([]);
  });

  it('should not let a duplicate answer of the first of two updates resolve the second', async () => {
    call = await connectScripted(
      { answerSessionUpdate: false },
      { sessionUpdateTimeoutMs: 2_000 },
      false,
    );
    const c = call;
    const first = pending(c.client.configure(A));
    const second = pending(c.client.configure(B));
    await waitFor(
      'both updates on the wire',
      () => c.server.received.filter((e) => e.type === 'session.update').length === 2,
    );
    const answerA = {
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: A.instructions },
    };
    c.server.send(answerA);
    c.server.send(answerA);
    await first.promise;
    await sleep(150);
    expect(second.settled).toBe(false);
    c.server.send({
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: B.instructions },
    });
    await second.promise;
  });
});

describe('when the server leaves the instructions out of session.updated', () => {
  it('should take each answer for the oldest waiting update, in order', async () => {
    call = await connectScripted(
      { answerSessionUpdate: false },
      { sessionUpdateTimeoutMs: 2_000 },
      false,
    );
    const c = call;
    const first = pending(c.client.configure(A));
    const second = pending(c.client.configure(B));
    await waitFor(
      'both updates on the wire',
      () => c.server.received.filter((e) => e.type === 'session.update').length === 2,
    );
    c.server.send({ type: 'session.updated', session: SESSION_WIRE });
    await first.promise;
    await sleep(50);
    expect(second.settled).toBe(false);
    c.server.send({ type: 'session.updated', session: SESSION_WIRE });
    await second.promise;
  });
});

describe('when session.updated arrives with no configure() waiting', () => {
  it('should count it and not take it as the answer to a later update', async () => {
    call = await connectScripted(
      { answerSessionUpdate: false },
      { sessionUpdateTimeoutMs: 2_000 },
      false,
    );
    const c = call;
    const before = await protocolErrorCount('unsolicited_session_updated');
    c.server.send({
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: A.instructions },
    });
    await sleep(100);
    expect(await protocolErrorCount('unsolicited_session_updated')).toBe(before + 1);
    const configuring = pending(c.client.configure(A));
    await sleep(150);
    expect(configuring.settled).toBe(false);
    c.server.send({
      type: 'session.updated',
      session: { ...SESSION_WIRE, instructions: A.instructions },
    });
    await configuring.promise;
    expect(eventsOf(c.events, 'error')).toEqual([]);
  });
});
