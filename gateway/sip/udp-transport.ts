/**
 * SIP over UDP: one socket, one datagram per message. The receive buffer is enlarged so a burst
 * of INVITEs waits in the kernel instead of being dropped while the event loop is busy.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import type { Logger } from '../../config/log.ts';
import type { SipEndpoint, SipMessageHandler, SipTransport } from './sip-transport.ts';

export interface UdpTransportOptions {
  readonly address: string;
  readonly port: number;
  readonly receiveBufferBytes: number;
  readonly onMessage: SipMessageHandler;
  readonly logger: Logger;
}

export class UdpTransport implements SipTransport {
  readonly name = 'udp' as const;
  private socket: Socket | undefined;

  constructor(private readonly options: UdpTransportOptions) {}

  start(): Promise<{ address: string; port: number }> {
    const socket = createSocket({ type: isIPv6(this.options.address) ? 'udp6' : 'udp4', recvBufferSize: this.options.receiveBufferBytes });
    this.socket = socket;
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.on('message', (data, info) => {
        this.options.onMessage(data, { transport: 'udp', address: info.address, port: info.port });
      });
      socket.bind(this.options.port, this.options.address, () => {
        socket.off('error', reject);
        socket.on('error', (error) => this.options.logger.warn('udp socket error', { error }));
        try {
          // The kernel may cap the size (net.core.rmem_max); the call asks, it does not insist.
          socket.setRecvBufferSize(this.options.receiveBufferBytes);
        } catch (error) {
          this.options.logger.warn('cannot set the UDP receive buffer size', { error, bytes: this.options.receiveBufferBytes });
        }
        const bound = socket.address();
        resolve({ address: bound.address, port: bound.port });
      });
    });
  }

  /** The receive buffer the kernel actually granted (Linux reports twice the usable size). */
  receiveBufferSize(): number | undefined {
    return this.socket?.getRecvBufferSize();
  }

  send(data: Buffer, to: SipEndpoint): void {
    this.socket?.send(data, to.port, to.address, (error) => {
      if (error) this.options.logger.warn('udp send failed', { error, to: `${to.address}:${to.port}` });
    });
  }

  stop(): Promise<void> {
    const socket = this.socket;
    this.socket = undefined;
    if (socket === undefined) return Promise.resolve();
    return new Promise((resolve) => socket.close(() => resolve()));
  }
}
