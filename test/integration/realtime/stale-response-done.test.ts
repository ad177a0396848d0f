import { afterEach, describe, expect, it } from 'vitest';
import { eventsOf, waitFor } from './realtime-harness.ts';
import {
  connectScripted,
  protocolErrorCount,
  responseWire,
  sleep,
  type ScriptedCall,
  type WireEvent,
} from './scripted-model-server.ts';

let call: ScriptedCall | undefined;
afterEach(async () => {
  await call?.close();
  call = undefined;
});

function metadataOf(event: WireEvent): unknown {
  return (event.response as { metadata?: unknown } | undefined)?.metadata ?? null;
}

describe('when a duplicate response.done of a finished response arrives while the next one runs', () => {
  it('should ignore it and keep the running response guarded until its stall bound releases it', async () => {
    let creates = 0;
    call = await connectScripted(
      {
        onClientEvent: (event, server) => {
          if (event.type !== 'response.create') return;
          creates += 1;
          const metadata = metadataOf(event);
          if (creates === 1) {
            server.send({
              type: 'response.created',
              response: responseWire('resp_A', 'in_progress', metadata),
            });
            server.send({
              type: 'response.done',
              response: responseWire('resp_A', 'completed', metadata),
            });
          } else if (creates === 2) {
            // B starts; A's done comes again, and B's own done is lost.
            server.send({
              type: 'response.created',
              response: responseWire('resp_B', 'in_progress', metadata),
            });
            server.send({
              type: 'response.done',
              response: responseWire('resp_A', 'completed', metadata),
            });
          } else {
            server.send({
              type: 'response.created',
              response: responseWire(`resp_${creates}`, 'in_progress', metadata),
            });
            server.send({
              type: 'response.done',
              response: responseWire(`resp_${creates}`, 'completed', metadata),
            });
          }
        },
      },
      { responseStallTimeoutMs: 300, responseCreatedTimeoutMs: 300 },
    );
    const c = call;
    const ignoredBefore = await protocolErrorCount('unknown_response_done');
    c.client.createResponse();
    await waitFor('A done', () => eventsOf(c.events, 'response_done').length === 1);
    c.client.createResponse();
    await waitFor('B created', () => eventsOf(c.events, 'response_created').length === 2);
    const handle = c.client.createResponse();
    const third = await waitFor('the third request answered', () => handle.responseId, 3_000);
    expect(third).toBe('resp_3');
    await waitFor(
      'the third response done',
      () => eventsOf(c.events, 'response_done').length === 3,
    );
    // A is done once, B is released by its stall bound (not by A's duplicate), then the third runs.
    expect(
      eventsOf(c.events, 'response_done').map((e) => [e.responseId, e.status, e.reason]),
    ).toEqual([
      ['resp_A', 'completed', undefined],
      ['resp_B', 'failed', 'stalled'],
      ['resp_3', 'completed', undefined],
    ]);
    expect(
      c.server.received
        .filter((e) => e.type.startsWith('response.'))
        .map((e) => (e.type === 'response.cancel' ? `cancel ${String(e.response_id)}` : e.type)),
    ).toEqual(['response.create', 'response.create', 'cancel resp_B', 'response.create']);
    expect(await protocolErrorCount('unknown_response_done')).toBe(ignoredBefore + 1);
    // The duplicate is counted, not reported to the call layer.
    expect(eventsOf(c.events, 'error').map((e) => e.code)).toEqual(['CALLGATE_ERR_MODEL_TIMEOUT']);
  });
});

describe('when a response.done names a response that was never created', () => {
  it('should ignore it, and the running response ends with its own done', async () => {
    call = await connectScripted({}, { responseStallTimeoutMs: 300 });
    const c = call;
    c.server.send({ type: 'response.created', response: responseWire('resp_live', 'in_progress') });
    c.server.send({ type: 'response.done', response: responseWire('resp_ghost', 'completed') });
    await sleep(150);
    c.server.send({ type: 'response.done', response: responseWire('resp_live', 'completed') });
    await waitFor('the live response done', () => eventsOf(c.events, 'response_done')[0]);
    // Well past the stall bound: the live response ended once, by its own done.
    await sleep(400);
    expect(eventsOf(c.events, 'response_done').map((e) => [e.responseId, e.status])).toEqual([
      ['resp_live', 'completed'],
    ]);
    expect(eventsOf(c.events, 'error')).toEqual([]);
  });
});
