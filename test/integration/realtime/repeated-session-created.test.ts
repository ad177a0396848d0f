import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf } from './realtime-harness.ts';
import {
  connectScripted,
  SESSION_WIRE,
  sleep,
  type ScriptedCall,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

// The warning comes 400 ms after session.created: far enough apart from the repeat (at 100 ms)
// that a second timer started by the repeat would fire visibly later (at about 500 ms).
const LIMITS = { sessionLimitMs: 600, expiryWarningMs: 200 };

describe('when the server sends session.created a second time', () => {
  it('should warn of the session limit once, at the first session time, and report the repeat', async () => {
    call = await connectScripted({}, LIMITS);
    const c = call;
    const connectedAt = Date.now();
    const warnedAt: number[] = [];
    c.client.on('session_expiring', () => warnedAt.push(Date.now() - connectedAt));
    await sleep(100);
    c.server.send({ type: 'session.created', session: { ...SESSION_WIRE, id: 'sess_again' } });
    await sleep(800);
    expect(warnedAt).toHaveLength(1);
    expect(warnedAt[0]).toBeLessThan(480);
    expect(eventsOf(c.events, 'error').map((e) => [e.code, e.message])).toEqual([
      ['CALLGATE_ERR_MODEL_PROTOCOL', expect.stringMatching(/second session\.created/)],
    ]);
    expect(c.client.providerSessionId).toBe('sess_scripted');
  });

  it('should emit nothing after disconnected once closed', async () => {
    call = await connectScripted({}, LIMITS);
    const c = call;
    await sleep(100);
    c.server.send({ type: 'session.created', session: { ...SESSION_WIRE, id: 'sess_again' } });
    await sleep(100);
    await c.close();
    call = undefined;
    await sleep(700);
    const types = c.events.map((e) => e.type);
    expect(types.slice(types.indexOf('disconnected'))).toEqual(['disconnected']);
    expect(eventsOf(c.events, 'session_expiring')).toEqual([]);
  });
});
