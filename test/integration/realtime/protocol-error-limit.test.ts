import { afterEach, describe, expect, it } from 'vitest';
import { REPORTED_PROTOCOL_ERRORS } from '../../../gateway/realtime/openai-realtime-session.ts';
import { eventsOf, waitFor } from './realtime-harness.ts';
import {
  connectScripted,
  protocolErrorCount,
  responseWire,
  sleep,
  type ScriptedCall,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

describe('when the model floods the session with binary and malformed frames', () => {
  it(`should report at most ${REPORTED_PROTOCOL_ERRORS} of them as error events, count every one, and keep the session`, async () => {
    call = await connectScripted({
      onClientEvent: (event, server) => {
        if (event.type !== 'response.create') return;
        server.send({
          type: 'response.created',
          response: responseWire('resp_after', 'in_progress'),
        });
        server.send({ type: 'response.done', response: responseWire('resp_after', 'completed') });
      },
    });
    const c = call;
    const before = await protocolErrorCount();
    for (let i = 0; i < 50; i++) {
      c.server.sendRaw(Buffer.from([0xde, 0xad, i]), true);
      c.server.sendRaw(`{"type": "response.done", ${i}`);
      c.server.sendRaw(JSON.stringify({ event_id: `e${i}` }));
    }
    for (
      let waited = 0;
      (await protocolErrorCount()) < before + 150 && waited < 5_000;
      waited += 10
    )
      await sleep(10);
    expect(await protocolErrorCount()).toBe(before + 150);
    const errors = eventsOf(c.events, 'error');
    expect(errors).toHaveLength(REPORTED_PROTOCOL_ERRORS);
    expect(new Set(errors.map((e) => e.code))).toEqual(new Set(['CALLGATE_ERR_MODEL_PROTOCOL']));
    c.client.createResponse();
    await waitFor('a response after the flood', () => eventsOf(c.events, 'response_done')[0]);
    expect(c.client.connected).toBe(true);
  });
});
