/**
 * SIP over TCP: connections are framed by Content-Length, idle ones are closed, and responses go
 * back on the connection the request came in on (RFC 3261 section 18.2.2). When that connection
 * is gone, a new one is opened to the address the message names. The connection table is shared
 * with TLS (gateway/sip/tls-transport.ts), which adds the handshake in front of it.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../config/log.ts';
import {
  destinationProblem,
  SENT,
  type SendResult,
  type SipEndpoint,
  type SipMessageHandler,
  type SipTransport,
  type TransportDropReason,
} from './sip-transport.ts';
import { StreamFramer } from './stream-framer.ts';

export interface TcpTransportOptions {
  readonly address: string;
  readonly port: number;
  readonly maxHeaderBytes: number;
  readonly maxBodyBytes: number;
  readonly idleTimeoutMs: number;
  readonly onMessage: SipMessageHandler;
  readonly onDrop: (reason: TransportDropReason) => void;
  readonly logger: Logger;
}

export interface StreamConnectionsOptions extends Omit<TcpTransportOptions, 'address' | 'port'> {
  readonly transport: 'tcp' | 'tls';
  /** What each received message's source carries beyond address and port (TLS: the peer's chain). */
  readonly describe?: (socket: Socket) => Partial<SipEndpoint>;
}

export interface StreamConnection {
  readonly id: number;
  readonly socket: Socket;
  readonly key: string;
}

/**
 * The open connections of a stream transport, by id and by remote address: each one framed by
 * its own StreamFramer, closed when idle or when its framing breaks.
 */
export class StreamConnections {
  private nextId = 1;
  private readonly byId = new Map<number, StreamConnection>();
  private readonly byRemote = new Map<string, StreamConnection>();

  constructor(private readonly options: StreamConnectionsOptions) {}

  get size(): number {
    return this.byId.size;
  }

  /** Starts reading SIP from `socket` (already connected, or being connected to `remoteKey`). */
  adopt(socket: Socket, remoteKey?: string): StreamConnection {
    const id = this.nextId++;
    const key = remoteKey ?? remoteKeyOf(socket);
    const connection: StreamConnection = { id, socket, key };
    this.byId.set(id, connection);
    this.byRemote.set(key, connection);
    const framer = new StreamFramer({
      maxHeaderBytes: this.options.maxHeaderBytes,
      maxBodyBytes: this.options.maxBodyBytes,
    });
    socket.setNoDelay(true);
    socket.setTimeout(this.options.idleTimeoutMs, () => {
      this.options.onDrop('idle-timeout');
      socket.destroy();
    });
    socket.on('data', (chunk: Buffer) => {
      for (const output of framer.push(chunk)) {
        if (output.type === 'message') {
          this.options.onMessage(output.data, {
            transport: this.options.transport,
            address: stripMapped(socket.remoteAddress ?? ''),
            port: socket.remotePort ?? 0,
            connectionId: id,
            ...this.options.describe?.(socket),
          });
        } else {
          // A stream that broke its framing cannot be resynchronised: close it.
          this.options.onDrop(output.reason);
          socket.destroy();
        }
      }
    });
    socket.on('error', (error) =>
      this.options.logger.debug(`${this.options.transport} connection error`, { error }),
    );
    socket.on('close', () => {
      this.byId.delete(id);
      if (this.byRemote.get(key) === connection) this.byRemote.delete(key);
    });
    return connection;
  }

  /** The live connection `to` names (by id first, then by remote address). */
  find(to: SipEndpoint): StreamConnection | undefined {
    const found =
      (to.connectionId !== undefined ? this.byId.get(to.connectionId) : undefined) ??
      this.byRemote.get(`${to.address}|${to.port}`);
    return found !== undefined && !found.socket.destroyed ? found : undefined;
  }

  /** Writes to the connection `to` names, else to one `dial` opens. Never throws. */
  send(data: Buffer, to: SipEndpoint, dial: () => Socket): SendResult {
    try {
      const existing = this.find(to);
      if (existing !== undefined) {
        existing.socket.write(data);
        return SENT;
      }
      const problem = destinationProblem(to);
      if (problem !== undefined) return { ok: false, reason: problem };
      // connect throws synchronously on a bad port; a refused connection comes as an 'error' event.
      const socket = dial();
      this.adopt(socket, `${to.address}|${to.port}`);
      socket.write(data);
      return SENT;
    } catch (error) {
      return { ok: false, reason: error instanceof Error ? error.message : String(error) };
    }
  }

  closeAll(): void {
    for (const connection of this.byId.values()) connection.socket.destroy();
    this.byId.clear();
    this.byRemote.clear();
  }
}

export class TcpTransport implements SipTransport {
  readonly name = 'tcp' as const;
  private server: Server | undefined;
  private readonly connections: StreamConnections;

  constructor(private readonly options: TcpTransportOptions) {
    this.connections = new StreamConnections({ ...options, transport: 'tcp' });
  }

  start(): Promise<{ address: string; port: number }> {
    const server = createServer((socket) => this.connections.adopt(socket));
    this.server = server;
    return listen(server, this.options.address, this.options.port, 'tcp', this.options.logger);
  }

  /** Open connections, for tests and the active-connection gauge. */
  connectionCount(): number {
    return this.connections.size;
  }

  send(data: Buffer, to: SipEndpoint): SendResult {
    if (this.server === undefined) return { ok: false, reason: 'the TCP listener is not running' };
    return this.connections.send(data, to, () => connect({ host: to.address, port: to.port }));
  }

  stop(): Promise<void> {
    this.connections.closeAll();
    return closeServer(this.server, () => (this.server = undefined));
  }
}

/** Binds a stream listener; resolves with the address actually bound. */
export function listen(
  server: Server,
  address: string,
  port: number,
  name: string,
  logger: Logger,
): Promise<{ address: string; port: number }> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => {
      server.off('error', reject);
      server.on('error', (error) => logger.warn(`${name} server error`, { error }));
      const bound = server.address();
      if (bound === null || typeof bound === 'string')
        reject(new Error(`${name} server has no address`));
      else resolve({ address: bound.address, port: bound.port });
    });
  });
}

export function closeServer(server: Server | undefined, forget: () => void): Promise<void> {
  forget();
  if (server === undefined) return Promise.resolve();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `address|port` of a socket's peer, the key connections are found by. */
export function remoteKeyOf(socket: Socket): string {
  return `${stripMapped(socket.remoteAddress ?? '')}|${socket.remotePort ?? 0}`;
}

export function stripMapped(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
