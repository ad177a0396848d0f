/**
 * SIP over TCP: connections are framed by Content-Length, idle ones are closed, and responses go
 * back on the connection the request came in on (RFC 3261 section 18.2.2). When that connection
 * is gone, a new one is opened to the address the message names.
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

interface Connection {
  readonly id: number;
  readonly socket: Socket;
  readonly key: string;
}

export class TcpTransport implements SipTransport {
  readonly name = 'tcp' as const;
  private server: Server | undefined;
  private nextId = 1;
  private readonly byId = new Map<number, Connection>();
  private readonly byRemote = new Map<string, Connection>();

  constructor(private readonly options: TcpTransportOptions) {}

  start(): Promise<{ address: string; port: number }> {
    const server = createServer((socket) => this.adopt(socket));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port, this.options.address, () => {
        server.off('error', reject);
        server.on('error', (error) => this.options.logger.warn('tcp server error', { error }));
        const bound = server.address();
        if (bound === null || typeof bound === 'string')
          reject(new Error('tcp server has no address'));
        else resolve({ address: bound.address, port: bound.port });
      });
    });
  }

  /** Open connections, for tests and the active-connection gauge. */
  connectionCount(): number {
    return this.byId.size;
  }

  private adopt(socket: Socket, remoteKey?: string): Connection {
    const id = this.nextId++;
    const key = remoteKey ?? `${stripMapped(socket.remoteAddress ?? '')}|${socket.remotePort ?? 0}`;
    const connection: Connection = { id, socket, key };
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
    socket.on('data', (chunk) => {
      for (const output of framer.push(chunk)) {
        if (output.type === 'message') {
          const address = stripMapped(socket.remoteAddress ?? '');
          this.options.onMessage(output.data, {
            transport: 'tcp',
            address,
            port: socket.remotePort ?? 0,
            connectionId: id,
          });
        } else {
          // A stream that broke its framing cannot be resynchronised: close it.
          this.options.onDrop(output.reason);
          socket.destroy();
        }
      }
    });
    socket.on('error', (error) => this.options.logger.debug('tcp connection error', { error }));
    socket.on('close', () => {
      this.byId.delete(id);
      if (this.byRemote.get(key) === connection) this.byRemote.delete(key);
    });
    return connection;
  }

  send(data: Buffer, to: SipEndpoint): SendResult {
    if (this.server === undefined) return { ok: false, reason: 'the TCP listener is not running' };
    try {
      const existing =
        (to.connectionId !== undefined ? this.byId.get(to.connectionId) : undefined) ??
        this.byRemote.get(`${to.address}|${to.port}`);
      if (existing !== undefined && !existing.socket.destroyed) {
        existing.socket.write(data);
        return SENT;
      }
      const problem = destinationProblem(to);
      if (problem !== undefined) return { ok: false, reason: problem };
      // net.connect throws synchronously on a bad port; a refused connection comes as an 'error' event.
      const socket = connect({ host: to.address, port: to.port });
      this.adopt(socket, `${to.address}|${to.port}`);
      socket.write(data);
      return SENT;
    } catch (error) {
      return { ok: false, reason: error instanceof Error ? error.message : String(error) };
    }
  }

  stop(): Promise<void> {
    for (const connection of this.byId.values()) connection.socket.destroy();
    this.byId.clear();
    this.byRemote.clear();
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return Promise.resolve();
    return new Promise((resolve) => server.close(() => resolve()));
  }
}

function stripMapped(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
