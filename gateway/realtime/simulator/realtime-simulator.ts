/**
 * The local realtime model: a WebSocket server speaking the OpenAI Realtime GA subset callgate
 * uses, one SimulatorSession per connection. It is the embedded default when no model key is
 * configured, and what every realtime test drives (through the real OpenAI client).
 */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { CallgateError } from '../../../config/errors.ts';
import { rootLogger, type Logger } from '../../../config/log.ts';
import { SimulatorSession } from './simulator-session.ts';
import { loadSimulatorScript, type SimulatorScript } from './simulator-script.ts';
import { SpeechSynthesizer } from './speech-synthesizer.ts';

/** Client frames above this are refused (ws closes with 1009); an audio append is a few KB. */
export const MAX_CLIENT_FRAME_BYTES = 1024 * 1024;
/** Closed sessions kept for inspection; each holds its wire record (bounded by MAX_WIRE_RECORDS). */
export const KEPT_CLOSED_CONNECTIONS = 32;

export interface RealtimeSimulatorOptions {
  /** The script; the bundled demo script (or `scriptPath`) when unset. */
  script?: SimulatorScript;
  scriptPath?: string;
  synthesizer?: SpeechSynthesizer;
  /** Always loopback unless the demo is exposed on purpose. */
  host?: string;
  /** 0: any free port. */
  port?: number;
  deterministic?: boolean;
  /** 1 is real time; tests use a few times faster, 0 sends whole lines at once. */
  speechSpeed?: number;
  recordWire?: boolean;
  ignoreSessionUpdate?: boolean;
  maxSessionMs?: number;
  functionCallGapMs?: number;
  /** Session clock for the records (`said`, `heard`); Date.now by default. */
  clock?: () => number;
  maxFrameBytes?: number;
  logger?: Logger;
}

export interface SimulatorHandshake {
  path: string;
  model: string | null;
  authorization: 'bearer' | 'none' | 'other';
  /** Present only for beta clients; a GA client must not send it. */
  openaiBeta: string | undefined;
}

export interface SimulatorConnection {
  session: SimulatorSession;
  handshake: SimulatorHandshake;
  /** Drops the connection without a close handshake (a network failure as the client sees it). */
  terminate(): void;
  /** Closes with a code and reason, as a server going away does. */
  close(code: number, reason: string): void;
  /** Stops reading the client's frames (a stalled link or model): the client's sends back up. */
  pauseReading(): void;
  resumeReading(): void;
}

export class RealtimeSimulator {
  /** Open connections, and the most recent closed ones (KEPT_CLOSED_CONNECTIONS). */
  readonly connections: SimulatorConnection[] = [];
  private readonly closed: SimulatorConnection[] = [];
  private server: WebSocketServer | undefined;
  private script: SimulatorScript | undefined;
  private readonly synthesizer: SpeechSynthesizer;
  private readonly logger: Logger;
  private readonly waiters: ((connection: SimulatorConnection) => void)[] = [];

  constructor(private readonly options: RealtimeSimulatorOptions = {}) {
    this.synthesizer = options.synthesizer ?? new SpeechSynthesizer();
    this.logger = (options.logger ?? rootLogger()).child({ component: 'realtime-simulator' });
    this.script = options.script;
  }

  /** ws://host:port/v1/realtime, once started. */
  get url(): string {
    const address = this.server?.address() as AddressInfo | undefined;
    if (address === undefined)
      throw new CallgateError('CALLGATE_ERR_MODEL_CONNECT', {
        url: 'simulator',
        reason: 'not started',
      });
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `ws://${host}:${address.port}/v1/realtime`;
  }

  async start(): Promise<string> {
    this.script ??= await loadSimulatorScript(this.options.scriptPath);
    const server = new WebSocketServer({
      host: this.options.host ?? '127.0.0.1',
      port: this.options.port ?? 0,
      maxPayload: this.options.maxFrameBytes ?? MAX_CLIENT_FRAME_BYTES,
      perMessageDeflate: false,
    });
    this.server = server;
    server.on('connection', (socket, request) => this.accept(socket, request));
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', (error) =>
        reject(
          new CallgateError('CALLGATE_ERR_LISTEN_FAILED', {
            address: `${this.options.host ?? '127.0.0.1'}:${this.options.port ?? 0}`,
            reason: error.message,
          }),
        ),
      );
    });
    return this.url;
  }

  /** The next connection (or the first not yet taken), for tests that connect a client. */
  nextConnection(timeoutMs = 5_000): Promise<SimulatorConnection> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no simulator connection within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiters.push((connection) => {
        clearTimeout(timer);
        resolve(connection);
      });
    });
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    for (const client of server.clients) client.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private accept(socket: WebSocket, request: IncomingMessage): void {
    const url = new URL(request.url ?? '/', 'ws://simulator');
    const auth = request.headers.authorization;
    const handshake: SimulatorHandshake = {
      path: url.pathname,
      model: url.searchParams.get('model'),
      authorization: auth === undefined ? 'none' : /^Bearer \S+$/.test(auth) ? 'bearer' : 'other',
      openaiBeta: headerValue(request.headers['openai-beta']),
    };
    const script = this.script;
    if (script === undefined) {
      socket.close(1011, 'simulator has no script');
      return;
    }
    const session = new SimulatorSession({
      script,
      synthesizer: this.synthesizer,
      model: handshake.model ?? 'gpt-realtime',
      transport: {
        send: (text) => {
          if (socket.readyState === socket.OPEN) socket.send(text);
        },
        close: (code, reason) => socket.close(code, reason),
      },
      ...(this.options.deterministic !== undefined && {
        deterministic: this.options.deterministic,
      }),
      ...(this.options.speechSpeed !== undefined && { speechSpeed: this.options.speechSpeed }),
      ...(this.options.recordWire !== undefined && { recordWire: this.options.recordWire }),
      ...(this.options.ignoreSessionUpdate !== undefined && {
        ignoreSessionUpdate: this.options.ignoreSessionUpdate,
      }),
      ...(this.options.maxSessionMs !== undefined && { maxSessionMs: this.options.maxSessionMs }),
      ...(this.options.functionCallGapMs !== undefined && {
        functionCallGapMs: this.options.functionCallGapMs,
      }),
      ...(this.options.clock !== undefined && { clock: this.options.clock }),
    });
    const connection: SimulatorConnection = {
      session,
      handshake,
      terminate: () => socket.terminate(),
      close: (code, reason) => socket.close(code, reason),
      pauseReading: () => socket.pause(),
      resumeReading: () => socket.resume(),
    };
    this.connections.push(connection);
    socket.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        session.receive('\u0000binary');
        return;
      }
      session.receive(rawText(data));
    });
    socket.on('close', () => {
      session.onTransportClosed();
      this.closed.push(connection);
      // Closed sessions stay inspectable for tests, but a long-running demo must not keep them all.
      const keep = this.options.recordWire === false ? 0 : KEPT_CLOSED_CONNECTIONS;
      while (this.closed.length > keep) {
        const oldest = this.closed.shift();
        const index = oldest === undefined ? -1 : this.connections.indexOf(oldest);
        if (index >= 0) this.connections.splice(index, 1);
      }
    });
    socket.on('error', (error) =>
      this.logger.debug('simulator socket error', { error: error.message }),
    );
    this.waiters.shift()?.(connection);
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(',') : value;
}

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
