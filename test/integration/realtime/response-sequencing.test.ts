import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { OpenAIRealtimeSession } from '../../../gateway/realtime/openai-realtime-session.ts';
import {
  callerSpeech,
  clientWire,
  conversationWire,
  eventsOf,
  quietLogger,
  startHarness,
  streamFrames,
  waitFor,
  type Harness,
} from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** Checks the wire: a response.create only goes out when no response is active. */
function assertOneActiveAtATime(wire: readonly string[]): void {
  let active = false;
  for (const entry of wire) {
    if (entry === '> response.create')
      expect(active, 'a response.create went out while a response was active').toBe(false);
    if (entry === '< response.created') active = true;
    if (entry === '< response.done') active = false;
  }
}

describe('when three responses are asked for at the same moment', () => {
  it('should run them one after another and never send a create while one is active', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 } });
    const { client, connection, events } = harness;
    client.addSystemMessage('The booking A-1 is confirmed.');
    client.createResponse({ instructions: 'one' });
    client.createResponse({ instructions: 'two' });
    client.createResponse({ instructions: 'three' });
    await waitFor('three responses', () => eventsOf(events, 'response_done').length === 3, 20_000);
    const wire = conversationWire(connection);
    assertOneActiveAtATime(wire);
    expect(wire.filter((entry) => entry === '> response.create')).toHaveLength(3);
    expect(connection.session.wire.filter((r) => r.type === 'error')).toEqual([]);
    expect(eventsOf(events, 'error')).toEqual([]);
    expect(eventsOf(events, 'response_done').map((e) => e.status)).toEqual([
      'completed',
      'completed',
      'completed',
    ]);
    // The system message is spoken by the first response.
    expect(connection.session.said[0]?.text).toBe('The booking A-1 is confirmed.');
  });
});

describe('when the server starts a response just as the client asks for one', () => {
  it('should treat conversation_already_has_active_response as a wait, not a failure', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 } });
    const { client, connection, events } = harness;
    // The client's create is on its way; the caller speaks (side channel) before it arrives,
    // so the server's own response wins and refuses the client's.
    client.createResponse({ instructions: 'greet' });
    connection.session.callerSays('Hello?');
    await waitFor('two responses', () => eventsOf(events, 'response_done').length === 2, 20_000);
    const refusals = connection.session.wire.filter((r) => r.type === 'error');
    expect(refusals.map((r) => (r.event.error as { code: string }).code)).toEqual([
      'conversation_already_has_active_response',
    ]);
    expect(eventsOf(events, 'error')).toEqual([]);
    expect(clientWire(connection).filter((type) => !type.startsWith('simulator.'))).toEqual([
      'session.update',
      'response.create',
      'response.create',
    ]);
    // The retry waits for the server's response to finish.
    const wire = conversationWire(connection);
    expect(wire.lastIndexOf('> response.create')).toBeGreaterThan(wire.indexOf('< response.done'));
    expect(connection.session.responses.map((r) => r.trigger)).toEqual(['side_channel', 'client']);
  });
});

describe('when the queue of waiting responses is full', () => {
  it('should refuse more with CALLGATE_ERR_MODEL_BUSY instead of growing', async () => {
    harness = await startHarness({
      simulator: { speechSpeed: 20 },
      client: { maxQueuedResponses: 2 },
    });
    const { client, events } = harness;
    for (let i = 0; i < 4; i++) client.createResponse();
    const busy = eventsOf(events, 'error').filter((e) => e.code === 'CALLGATE_ERR_MODEL_BUSY');
    expect(busy).toHaveLength(1);
    await waitFor('three responses', () => eventsOf(events, 'response_done').length === 3, 20_000);
  });
});

describe('when a response is asked for while the caller is speaking', () => {
  it('should hold it until the utterance ends, and release it when the buffer is cleared', async () => {
    harness = await startHarness({
      config: {
        instructions: '',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        turnDetection: { type: 'server_vad', createResponse: false },
      },
    });
    const { client, connection, events } = harness;
    // Speech with no trailing silence: the utterance is still open.
    streamFrames(client, await callerSpeech('Hold on, I am still talking'));
    await waitFor('speech_started', () => eventsOf(events, 'speech_started')[0]);
    client.createResponse();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(clientWire(connection)).toEqual(['session.update']);
    client.clearAudio();
    await waitFor('the held response', () => eventsOf(events, 'response_done')[0]);
    expect(clientWire(connection)).toEqual([
      'session.update',
      'input_audio_buffer.clear',
      'response.create',
    ]);
  });
});

describe('when the server starts a response of its own while our create is on the wire', () => {
  it('should tell it from ours by the echoed metadata: no cancel of the server response, and our request sent again after it', async () => {
    const received: {
      type: string;
      event_id?: string;
      response?: { metadata?: Record<string, string>; instructions?: string };
      response_id?: string;
    }[] = [];
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    const send = (socket: WebSocket, event: object) => socket.send(JSON.stringify(event));
    const response = (id: string, status: string, metadata: Record<string, string> | null) => ({
      id,
      object: 'realtime.response',
      status,
      status_details: null,
      output: [],
      metadata,
    });
    server.on('connection', (socket) => {
      send(socket, {
        type: 'session.created',
        event_id: 'e0',
        session: { type: 'realtime', id: 'sess_race' },
      });
      let creates = 0;
      socket.on('message', (data: Buffer) => {
        const event = JSON.parse(data.toString()) as (typeof received)[number];
        received.push(event);
        if (event.type !== 'response.create') return;
        creates += 1;
        const metadata = event.response?.metadata ?? null;
        if (creates === 2) {
          // Server VAD started a response at the same instant: it is created untagged, our create is refused.
          send(socket, {
            type: 'response.created',
            event_id: 'e_srv',
            response: response('resp_server', 'in_progress', null),
          });
          send(socket, {
            type: 'error',
            event_id: 'e_err',
            error: {
              type: 'invalid_request_error',
              code: 'conversation_already_has_active_response',
              message: 'Conversation already has an active response in progress: resp_server.',
              param: null,
              event_id: event.event_id,
            },
          });
          setTimeout(
            () =>
              send(socket, {
                type: 'response.done',
                event_id: 'e_srv_done',
                response: response('resp_server', 'completed', null),
              }),
            100,
          );
          return;
        }
        const id = `resp_${creates}`;
        send(socket, {
          type: 'response.created',
          event_id: `e_c${creates}`,
          response: response(id, 'in_progress', metadata),
        });
        setTimeout(
          () =>
            send(socket, {
              type: 'response.done',
              event_id: `e_d${creates}`,
              response: response(id, 'completed', metadata),
            }),
          20,
        );
      });
    });
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    const client = new OpenAIRealtimeSession({
      url: `ws://127.0.0.1:${port}/v1/realtime`,
      model: 'gpt-realtime',
      logger: quietLogger,
    });
    const created: string[] = [];
    const done: string[] = [];
    client.on('response_created', (event) => created.push(event.responseId));
    client.on('response_done', (event) => done.push(event.responseId));
    try {
      await client.connect();
      // The first response teaches the client that this provider echoes metadata.
      client.createResponse({ instructions: 'first' });
      await waitFor('the first response', () => created.includes('resp_1'));
      await waitFor('the first response done', () => done.includes('resp_1'));
      const second = client.createResponse({ instructions: 'second' });
      // The caller barges in before our create is answered: the cancel is meant for our response only.
      client.cancelResponse();
      await waitFor('our request sent again and created', () => created.includes('resp_3'), 5_000);
      const types = received
        .map((e) => (e.type === 'response.cancel' ? `cancel:${e.response_id}` : e.type))
        .filter((t) => t !== 'session.update');
      // The server's response answers the caller's own turn: it is not cancelled for us.
      expect(types.filter((t) => t.startsWith('cancel:'))).toEqual([]);
      const creates = received.filter((e) => e.type === 'response.create');
      expect(creates.map((e) => e.response?.instructions)).toEqual(['first', 'second', 'second']);
      // Each create carries its own tag, and the server response was never mistaken for one.
      expect(new Set(creates.map((e) => e.response?.metadata?.callgate_create)).size).toBe(3);
      expect(created).toEqual(['resp_1', 'resp_server', 'resp_3']);
      // The server's response, created while our request was out, does not answer its handle.
      expect(second.responseId).toBe('resp_3');
    } finally {
      await client.close();
      for (const socket of server.clients) socket.terminate();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('when several responses are asked for', () => {
  it('should give each its own handle, created with its own response and done once', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 20 } });
    const { client, events } = harness;
    const handles = [client.createResponse(), client.createResponse(), client.createResponse()];
    await waitFor('three responses', () => eventsOf(events, 'response_done').length === 3, 20_000);
    const ends = await Promise.all(handles.map((handle) => handle.ended));
    const created = eventsOf(events, 'response_created').map((e) => e.responseId);
    expect(handles.map((handle) => handle.responseId)).toEqual(created);
    expect(ends).toEqual(
      created.map((responseId) => ({ type: 'done', responseId, status: 'completed' })),
    );
    // Each handle saw the audio item of its own response.
    for (const handle of handles) expect(handle.items).toHaveLength(1);
  });
});

describe('when a request will get no response', () => {
  /** A provider that answers every response.create with `reply`, or not at all. */
  async function provider(
    reply: 'refuse_active' | 'reject_invalid' | 'silence',
  ): Promise<{ port: number; creates: () => number; close: () => Promise<void> }> {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    let creates = 0;
    server.on('connection', (socket) => {
      socket.send(
        JSON.stringify({
          type: 'session.created',
          event_id: 'e0',
          session: { type: 'realtime', id: 'sess_drop' },
        }),
      );
      socket.on('message', (data: Buffer) => {
        const event = JSON.parse(data.toString()) as { type: string; event_id?: string };
        if (event.type !== 'response.create') return;
        creates += 1;
        if (reply === 'silence') return;
        const code =
          reply === 'refuse_active' ? 'conversation_already_has_active_response' : 'invalid_value';
        socket.send(
          JSON.stringify({
            type: 'error',
            event_id: `e_err${creates}`,
            error: {
              type: 'invalid_request_error',
              code,
              message: `refused (${code})`,
              param: null,
              event_id: event.event_id,
            },
          }),
        );
      });
    });
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    return {
      port,
      creates: () => creates,
      close: async () => {
        for (const socket of server.clients) socket.terminate();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  }

  const cases = [
    { reply: 'refuse_active', code: 'CALLGATE_ERR_MODEL_BUSY', reason: 'refused', creates: 3 },
    { reply: 'reject_invalid', code: 'CALLGATE_ERR_MODEL_REJECTED', reason: 'refused', creates: 1 },
    { reply: 'silence', code: 'CALLGATE_ERR_MODEL_TIMEOUT', reason: 'timeout', creates: 1 },
  ] as const;
  for (const { reply, code, reason, creates } of cases) {
    it(`should refuse the request's handle when the provider's answer is ${reply}`, async () => {
      const fake = await provider(reply);
      const client = new OpenAIRealtimeSession({
        url: `ws://127.0.0.1:${fake.port}/v1/realtime`,
        model: 'gpt-realtime',
        logger: quietLogger,
        responseCreatedTimeoutMs: 300,
      });
      const errors: { code: string }[] = [];
      client.on('error', (event) => errors.push(event));
      try {
        await client.connect();
        const handle = client.createResponse();
        await waitFor('the request given up on', () => handle.end !== undefined, 5_000);
        expect(handle.end).toEqual({ type: 'refused', reason });
        expect(errors).toEqual([expect.objectContaining({ code })]);
        expect(fake.creates()).toBe(creates);
        // Given up on means given up: nothing more goes out for it.
        await new Promise((resolve) => setTimeout(resolve, 400));
        expect(fake.creates()).toBe(creates);
      } finally {
        await client.close();
        await fake.close();
      }
    });
  }

  it('should refuse the request at once when the queue has no room for it', async () => {
    const fake = await provider('silence');
    const client = new OpenAIRealtimeSession({
      url: `ws://127.0.0.1:${fake.port}/v1/realtime`,
      model: 'gpt-realtime',
      logger: quietLogger,
      responseCreatedTimeoutMs: 30_000,
    });
    const errors: { code: string }[] = [];
    client.on('error', (event) => errors.push(event));
    try {
      await client.connect();
      // One create out and unanswered, eight waiting: the tenth has no room.
      const handles = Array.from({ length: 10 }, () => client.createResponse());
      expect(handles.map((handle) => handle.end?.type)).toEqual([
        ...Array<undefined>(9).fill(undefined),
        'refused',
      ]);
      expect(handles[9]?.end).toEqual({ type: 'refused', reason: 'busy' });
      expect(errors).toEqual([expect.objectContaining({ code: 'CALLGATE_ERR_MODEL_BUSY' })]);
    } finally {
      await client.close();
      await fake.close();
    }
  });
});
