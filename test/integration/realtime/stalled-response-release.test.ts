import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf, waitFor } from './realtime-harness.ts';
import {
  activeTimers,
  connectScripted,
  responseWire,
  sleep,
  type ScriptedCall,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

const MULAW = Buffer.alloc(800, 0x55).toString('base64');

describe('when a response speaks, dispatches a call and then goes silent', () => {
  it('should give the call layer a failed response_done saying it stalled, and cancel it on the wire', async () => {
    const timersBefore = activeTimers();
    let creates = 0;
    call = await connectScripted(
      {
        onClientEvent: (event, server) => {
          if (event.type !== 'response.create') return;
          creates += 1;
          const metadata = (event.response as { metadata?: unknown } | undefined)?.metadata ?? null;
          const id = `resp_${creates}`;
          server.send({
            type: 'response.created',
            response: responseWire(id, 'in_progress', metadata),
          });
          if (creates === 1) {
            server.send({
              type: 'response.output_audio.delta',
              response_id: id,
              item_id: 'item_a',
              output_index: 0,
              content_index: 0,
              delta: MULAW,
            });
            server.send({
              type: 'response.function_call_arguments.done',
              response_id: id,
              item_id: 'item_f',
              output_index: 1,
              call_id: 'call_1',
              name: 'check_table',
              arguments: '{}',
            });
            // ... and its response.done is lost.
            return;
          }
          server.send({ type: 'response.done', response: responseWire(id, 'completed', metadata) });
        },
      },
      { responseStallTimeoutMs: 200 },
    );
    const c = call;
    const first = c.client.createResponse();
    const next = c.client.createResponse();
    const done = await waitFor(
      'the stalled response released',
      () => eventsOf(c.events, 'response_done')[0],
      2_000,
    );
    expect(done).toEqual({
      type: 'response_done',
      responseId: 'resp_1',
      status: 'failed',
      reason: 'stalled',
      callIds: ['call_1'],
    });
    // The handle ends with its response, as the call layer was told.
    expect(await first.ended).toEqual({
      type: 'done',
      responseId: 'resp_1',
      status: 'failed',
      reason: 'stalled',
    });
    await waitFor('the queued response done', () => eventsOf(c.events, 'response_done')[1]);
    expect(await next.ended).toMatchObject({ type: 'done', status: 'completed' });
    expect(c.events.map((e) => e.type)).toEqual([
      'response_created',
      'audio_delta',
      'function_call',
      'error',
      'response_done',
      'response_created',
      'response_done',
    ]);
    expect(eventsOf(c.events, 'error')[0]?.code).toBe('CALLGATE_ERR_MODEL_TIMEOUT');
    // The cancel reaches the server before the next create, so a server still running it ends it first.
    expect(
      c.server.received
        .filter((e) => e.type.startsWith('response.'))
        .map((e) => [e.type, e.response_id]),
    ).toEqual([
      ['response.create', undefined],
      ['response.cancel', 'resp_1'],
      ['response.create', undefined],
    ]);
    // cancelAndWait has nothing left to wait for.
    const started = Date.now();
    await c.client.cancelAndWait(5_000);
    expect(Date.now() - started).toBeLessThan(100);

    // The server's late done for the response given up is not a second response_done.
    c.server.send({ type: 'response.done', response: responseWire('resp_1', 'cancelled') });
    await sleep(300);
    expect(eventsOf(c.events, 'response_done').map((e) => [e.responseId, e.status])).toEqual([
      ['resp_1', 'failed'],
      ['resp_2', 'completed'],
    ]);
    await c.close();
    call = undefined;
    await waitFor('no timers left', () => activeTimers() <= timersBefore, 2_000);
  });
});

describe('when the session closes while a response runs', () => {
  it('should leave no stall timer behind and emit nothing after disconnected', async () => {
    const timersBefore = activeTimers();
    call = await connectScripted({}, { responseStallTimeoutMs: 200 });
    const c = call;
    c.server.send({ type: 'response.created', response: responseWire('resp_1', 'in_progress') });
    await waitFor('the response', () => eventsOf(c.events, 'response_created')[0]);
    await c.close();
    call = undefined;
    await waitFor('no timers left', () => activeTimers() <= timersBefore, 2_000);
    await sleep(400);
    expect(c.events.map((e) => e.type)).toEqual(['response_created', 'disconnected']);
  });
});
