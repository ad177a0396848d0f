/** A test peer on loopback (127.0.0.1 unless told): a UDP socket that sends RTP to a session and records what comes back. */
import { createSocket, type Socket } from 'node:dgram';
import {
  parseRtpPacket,
  serializeRtpPacket,
  type RtpPacket,
  type RtpPacketInit,
} from '../../../gateway/media/rtp-packet.ts';

export interface ReceivedPacket {
  readonly atMs: number;
  readonly data: Buffer;
  readonly packet: RtpPacket | undefined;
}

export class RtpPeer {
  readonly received: ReceivedPacket[] = [];
  private constructor(private readonly socket: Socket) {}

  /** `address`: another loopback address (127.0.0.2) is a host the call did not name. */
  static async open(port = 0, address = '127.0.0.1'): Promise<RtpPeer> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, address, () => resolve());
    });
    const peer = new RtpPeer(socket);
    socket.on('message', (data) => {
      const parsed = parseRtpPacket(data);
      peer.received.push({
        atMs: performance.now(),
        data,
        packet: parsed.ok ? parsed.packet : undefined,
      });
    });
    return peer;
  }

  get port(): number {
    return this.socket.address().port;
  }

  get address(): string {
    return this.socket.address().address;
  }

  sendRaw(data: Buffer, port: number): void {
    this.socket.send(data, port, '127.0.0.1');
  }

  send(init: RtpPacketInit, port: number): void {
    this.sendRaw(serializeRtpPacket(init), port);
  }

  packets(): RtpPacket[] {
    return this.received.flatMap((r) => (r.packet ? [r.packet] : []));
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.socket.close(() => resolve()));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function waitFor(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}
