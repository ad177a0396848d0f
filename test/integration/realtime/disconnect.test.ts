import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { OpenAIRealtimeSession } from '../../../gateway/realtime/openai-realtime-session.ts';
import {
  eventsOf,
  quietLogger,
  silence,
  startHarness,
  waitFor,
  type Harness,
} from './realtime-harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

async function midResponse(h: Harness): Promise<void> {
  h.client.createResponse();
  await waitFor('audio of the response', () => eventsOf(h.events, 'audio_delta').length >= 3);
}

describe('when the connection drops in the middle of a response', () => {
  it('should emit one disconnected event with a reason and send nothing more', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 1 } });
    const h = harness;
    await midResponse(h);
    const receivedBefore = h.connection.session.receivedTypes().length;
    h.connection.terminate();
    const disconnected = await waitFor('disconnected', () => eventsOf(h.events, 'disconnected')[0]);
    expect(disconnected.reason).toBe('network');
    expect(h.client.connected).toBe(false);
    // Nothing goes out after the drop: audio is dropped and counted, commands are refused.
    h.client.sendAudio(silence(20));
    h.client.sendAudio(silence(20));
    h.client.createResponse();
    h.client.sendToolOutput('call_1', { ok: true });
    h.client.cancelResponse();
    expect(h.client.droppedAudioFrames).toBe(2);
    expect(eventsOf(h.events, 'error').map((e) => e.code)).toEqual([
      'CALLGATE_ERR_MODEL_NOT_CONNECTED',
      'CALLGATE_ERR_MODEL_NOT_CONNECTED',
    ]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.connection.session.receivedTypes()).toHaveLength(receivedBefore);
    expect(eventsOf(h.events, 'disconnected')).toHaveLength(1);
    // No silent reconnect: the simulator saw exactly one connection.
    expect(h.simulator.connections).toHaveLength(1);
    await expect(h.client.configure({ instructions: '' })).rejects.toMatchObject({
      code: 'CALLGATE_ERR_MODEL_NOT_CONNECTED',
    });
  });

  it('should report a server close with its code and reason', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 1 } });
    const h = harness;
    await midResponse(h);
    h.connection.close(1011, 'internal error');
    const disconnected = await waitFor('disconnected', () => eventsOf(h.events, 'disconnected')[0]);
    expect(disconnected).toEqual({
      type: 'disconnected',
      reason: 'server_closed',
      detail: 'internal error',
      closeCode: 1011,
    });
  });
});

describe('when the session reaches the provider time limit', () => {
  it('should report session_limit, not a failure', async () => {
    harness = await startHarness({ simulator: { maxSessionMs: 300 } });
    const h = harness;
    const disconnected = await waitFor(
      'disconnected',
      () => eventsOf(h.events, 'disconnected')[0],
      5_000,
    );
    expect(disconnected.reason).toBe('session_limit');
    expect(disconnected.closeCode).toBe(1001);
    expect(eventsOf(h.events, 'error')).toEqual([]);
  });
});

describe('when the session limit approaches', () => {
  it('should warn before the provider closes, then report session_limit', async () => {
    harness = await startHarness({
      simulator: { maxSessionMs: 400 },
      client: { sessionLimitMs: 400, expiryWarningMs: 250 },
    });
    const h = harness;
    await waitFor('disconnected', () => eventsOf(h.events, 'disconnected')[0], 5_000);
    expect(
      h.events
        .filter((e) => e.type === 'session_expiring' || e.type === 'disconnected')
        .map((e) => e.type),
    ).toEqual(['session_expiring', 'disconnected']);
    expect(eventsOf(h.events, 'session_expiring')[0]?.remainingMs).toBe(250);
  });
});

describe('when the call layer closes the session', () => {
  it('should report closed', async () => {
    harness = await startHarness();
    await harness.client.close();
    expect(eventsOf(harness.events, 'disconnected')[0]?.reason).toBe('closed');
  });

  it('should report aborted when the call signal fires', async () => {
    const controller = new AbortController();
    harness = await startHarness({ client: { signal: controller.signal } });
    controller.abort();
    const disconnected = await waitFor(
      'disconnected',
      () => eventsOf(harness?.events ?? [], 'disconnected')[0],
    );
    expect(disconnected.reason).toBe('aborted');
  });
});

describe('when cancelAndWait is used during a response', () => {
  it('should resolve once the response is done', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 1 } });
    const h = harness;
    await midResponse(h);
    await h.client.cancelAndWait(2_000);
    expect(eventsOf(h.events, 'response_done')[0]?.status).toBe('cancelled');
  });

  it('should resolve after the timeout when nothing answers', async () => {
    harness = await startHarness({ simulator: { speechSpeed: 1 } });
    const h = harness;
    await midResponse(h);
    h.connection.session.onTransportClosed(); // the simulated model stops answering, socket stays up
    const started = Date.now();
    await h.client.cancelAndWait(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(eventsOf(h.events, 'response_done')).toEqual([]);
  });
});

describe('when the model cannot be reached', () => {
  it('should reject connect with CALLGATE_ERR_MODEL_CONNECT', async () => {
    const client = new OpenAIRealtimeSession({
      url: 'ws://127.0.0.1:9/v1/realtime',
      model: 'gpt-realtime',
      logger: quietLogger,
    });
    const events: string[] = [];
    client.onAny((event) => events.push(event.type));
    await expect(client.connect()).rejects.toMatchObject({ code: 'CALLGATE_ERR_MODEL_CONNECT' });
    expect(events).toEqual([]);
  });
});

describe('when the model stops answering pings', () => {
  it('should declare the link dead and report disconnected with reason network', async () => {
    // A peer that accepts the session but never answers a ping (autoPong off).
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: false });
    server.on('connection', (socket) =>
      socket.send(
        JSON.stringify({
          type: 'session.created',
          event_id: 'e1',
          session: { type: 'realtime', id: 'sess_silent' },
        }),
      ),
    );
    await new Promise((resolve) => server.once('listening', resolve));
    const address = server.address() as { port: number };
    const client = new OpenAIRealtimeSession({
      url: `ws://127.0.0.1:${address.port}/v1/realtime`,
      model: 'gpt-realtime',
      logger: quietLogger,
      pingIntervalMs: 50,
      pongTimeoutMs: 100,
    });
    const events: string[] = [];
    client.on('disconnected', (event) => events.push(`${event.reason}: ${event.detail}`));
    try {
      await client.connect();
      await waitFor('disconnected', () => events[0], 3_000);
      expect(events).toEqual(['network: no pong within 100 ms']);
    } finally {
      await client.close();
      for (const socket of server.clients) socket.terminate();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
