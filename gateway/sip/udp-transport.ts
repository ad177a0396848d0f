/**
 * SIP over UDP: one socket, one datagram per message. The receive buffer is enlarged so a burst
 * of INVITEs waits in the kernel instead of being dropped while the event loop is busy.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import type { Logger } from '../../config/log.ts';
import { readFileSync } from 'node:fs';
import {
  destinationProblem,
  SENT,
  type SendResult,
  type SipEndpoint,
  type SipMessageHandler,
  type SipTransport,
} from './sip-transport.ts';

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
  private granted: number | undefined;

  constructor(private readonly options: UdpTransportOptions) {}

  start(): Promise<{ address: string; port: number }> {
    const socket = createSocket({
      type: isIPv6(this.options.address) ? 'udp6' : 'udp4',
      recvBufferSize: this.options.receiveBufferBytes,
    });
    this.socket = socket;
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.on('message', (data, info) => {
        this.options.onMessage(data, { transport: 'udp', address: info.address, port: info.port });
      });
      socket.bind(this.options.port, this.options.address, () => {
        socket.off('error', reject);
        socket.on('error', (error) => this.options.logger.warn('udp socket error', { error }));
        this.growReceiveBuffer(socket);
        const bound = socket.address();
        resolve({ address: bound.address, port: bound.port });
      });
    });
  }

  /**
   * Asks for `receiveBufferBytes` (SO_RCVBUF). Linux grants at most net.core.rmem_max and reports
   * twice what it granted (the doubling covers its bookkeeping); a smaller grant is logged with
   * the sysctl that would lift it, since bursts beyond it are dropped by the kernel unseen.
   */
  private growReceiveBuffer(socket: Socket): void {
    const wanted = this.options.receiveBufferBytes;
    try {
      socket.setRecvBufferSize(wanted);
    } catch (error) {
      this.options.logger.warn('cannot set the UDP receive buffer size', { error, bytes: wanted });
      return;
    }
    const granted = grantedReceiveBuffer(socket.getRecvBufferSize());
    this.granted = granted;
    if (granted < wanted) {
      this.options.logger.warn(
        'the kernel capped the UDP receive buffer: bursts above it are dropped',
        {
          requestedBytes: wanted,
          grantedBytes: granted,
          rmemMax: readRmemMax(),
          fix: `sysctl -w net.core.rmem_max=${wanted}`,
        },
      );
    } else {
      this.options.logger.info('UDP receive buffer', { grantedBytes: granted });
    }
  }

  /** The receive buffer the kernel granted, in usable bytes (undefined before start). */
  receiveBufferSize(): number | undefined {
    return this.granted;
  }

  send(data: Buffer, to: SipEndpoint): SendResult {
    const socket = this.socket;
    if (socket === undefined) return { ok: false, reason: 'the UDP socket is not running' };
    const problem = destinationProblem(to);
    if (problem !== undefined) return { ok: false, reason: problem };
    try {
      // dgram throws synchronously on a bad port or a closed socket; later errors come to the callback.
      socket.send(data, to.port, to.address, (error) => {
        if (error)
          this.options.logger.warn('udp send failed', { error, to: `${to.address}:${to.port}` });
      });
      return SENT;
    } catch (error) {
      return { ok: false, reason: error instanceof Error ? error.message : String(error) };
    }
  }

  stop(): Promise<void> {
    const socket = this.socket;
    this.socket = undefined;
    if (socket === undefined) return Promise.resolve();
    return new Promise((resolve) => socket.close(() => resolve()));
  }
}

/** Linux reports SO_RCVBUF doubled; other kernels report what they granted. */
export function grantedReceiveBuffer(
  reported: number,
  platform: NodeJS.Platform = process.platform,
): number {
  return platform === 'linux' ? Math.floor(reported / 2) : reported;
}

/** net.core.rmem_max, where the kernel says (Linux); undefined elsewhere. */
function readRmemMax(): number | undefined {
  try {
    return Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8').trim());
  } catch {
    return undefined;
  }
}
