/**
 * A realtime model that says exactly what a test scripts, on 127.0.0.1 port 0: session.created on
 * connect, session.updated for each session.update (unless told not to), and then only the
 * frames the test sends or its `onClientEvent` answers with. For the protocol's hostile and broken
 * cases that the simulator, being faithful, never produces.
 */
import { WebSocketServer, type WebSocket } from 'ws';
import {
  OpenAIRealtimeSession,
  type OpenAIRealtimeSessionOptions,
} from '../../../gateway/realtime/openai-realtime-session.ts';
import type { RealtimeEvent, SessionConfig } from '../../../gateway/realtime/realtime-session.ts';
import { registry } from '../../../config/metrics.ts';
import { quietLogger } from './realtime-harness.ts';

export type WireEvent = Record<string, unknown> & { type: string };

export interface ScriptedModelServerOptions {
  /** Answer each session.update with the session.updated it asks for (default true). */
  answerSessionUpdate?: boolean;
  onClientEvent?: (event: WireEvent, server: ScriptedModelServer) => void;
}

export interface ScriptedModelServer {
  url: string;
  /** What the client sent, in order (appends included). */
  received: WireEvent[];
  send(event: object): void;
  sendRaw(data: string | Buffer, binary?: boolean): void;
  close(): Promise<void>;
}

export const SESSION_WIRE = {
  type: 'realtime',
  id: 'sess_scripted',
  audio: {
    input: {
      format: { type: 'audio/pcmu' },
      turn_detection: { type: 'server_vad', interrupt_response: true },
    },
    output: { format: { type: 'audio/pcmu' } },
  },
};

export const CONFIG: SessionConfig = {
  instructions: 'You are the Blue Harbour restaurant assistant.',
  inputFormat: 'pcmu',
  outputFormat: 'pcmu',
  turnDetection: { type: 'server_vad' },
};

/** A response object as the provider writes it. */
export function responseWire(
  id: unknown,
  status: string,
  metadata: unknown = null,
  output: unknown[] = [],
): Record<string, unknown> {
  return { id, object: 'realtime.response', status, status_details: null, output, metadata };
}

export async function startScriptedModelServer(
  options: ScriptedModelServerOptions = {},
): Promise<ScriptedModelServer> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const { port } = wss.address() as { port: number };
  let socket: WebSocket | undefined;
  let seq = 0;
  const server: ScriptedModelServer = {
    url: `ws://127.0.0.1:${port}/v1/realtime`,
    received: [],
    send: (event) => socket?.send(JSON.stringify({ event_id: `event_s${++seq}`, ...event })),
    sendRaw: (data, binary = false) => socket?.send(data, { binary }),
    close: async () => {
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
  wss.on('connection', (ws) => {
    socket = ws;
    ws.on('error', () => undefined);
    server.send({ type: 'session.created', session: SESSION_WIRE });
    ws.on('message', (data: Buffer) => {
      const event = JSON.parse(data.toString('utf8')) as WireEvent;
      server.received.push(event);
      if (event.type === 'session.update' && options.answerSessionUpdate !== false) {
        server.send({
          type: 'session.updated',
          session: { ...SESSION_WIRE, ...(event.session as object) },
        });
      }
      options.onClientEvent?.(event, server);
    });
  });
  return server;
}

export interface ScriptedCall {
  server: ScriptedModelServer;
  client: OpenAIRealtimeSession;
  events: RealtimeEvent[];
  close(): Promise<void>;
}

/** The real client connected (and configured unless `configure` is false) to a scripted server. */
export async function connectScripted(
  serverOptions: ScriptedModelServerOptions = {},
  clientOptions: Partial<OpenAIRealtimeSessionOptions> = {},
  configure = true,
): Promise<ScriptedCall> {
  const server = await startScriptedModelServer(serverOptions);
  const client = new OpenAIRealtimeSession({
    url: server.url,
    model: 'gpt-realtime',
    logger: quietLogger,
    ...clientOptions,
  });
  const events: RealtimeEvent[] = [];
  client.onAny((event) => events.push(event));
  await client.connect();
  if (configure) await client.configure(CONFIG);
  return {
    server,
    client,
    events,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** Timers that keep the process alive (unref'd ones, like the session's expiry warning, are not listed). */
export function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
}

/** The value of callgate_realtime_protocol_errors_total for `kind`, summed when kind is left out. */
export async function protocolErrorCount(kind?: string): Promise<number> {
  const metric = registry.getSingleMetric('callgate_realtime_protocol_errors_total');
  if (metric === undefined) return 0;
  const { values } = await metric.get();
  return values
    .filter((value) => kind === undefined || value.labels.kind === kind)
    .reduce((sum, value) => sum + value.value, 0);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
