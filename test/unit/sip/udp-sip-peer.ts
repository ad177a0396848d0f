/**
 * A bare SIP peer on a UDP socket on loopback for the stack tests: it writes requests by hand and
 * collects what callgate sends back, so a test asserts exactly what went on the wire.
 */
import { createSocket, type Socket } from 'node:dgram';

export interface RequestOptions {
  readonly headers?: Readonly<Record<string, string>>;
  readonly toTag?: string;
  readonly fromTag?: string;
  readonly body?: string;
  readonly uri?: string;
  readonly callId?: string;
  readonly cseq?: number;
  readonly branch?: string;
}

let sequence = 0;

export class UdpSipPeer {
  private readonly received: string[] = [];

  private constructor(
    readonly socket: Socket,
    readonly address: string,
  ) {
    socket.on('message', (data) => this.received.push(data.toString()));
  }

  static async open(address = '127.0.0.1'): Promise<UdpSipPeer> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, address, resolve));
    return new UdpSipPeer(socket, address);
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** A request with every mandatory header; unique Call-ID and branch unless given. */
  request(method: string, options: RequestOptions = {}): string {
    sequence += 1;
    const headers: Record<string, string> = {
      Via: `SIP/2.0/UDP ${this.address}:${this.port};branch=${options.branch ?? `z9hG4bKpeer${sequence}`}`,
      'Max-Forwards': '70',
      From: `<sip:alice@example.com>;tag=${options.fromTag ?? 'a1'}`,
      To: `<sip:100@127.0.0.1>${options.toTag !== undefined ? `;tag=${options.toTag}` : ''}`,
      'Call-ID': options.callId ?? `peer-${process.pid}-${sequence}`,
      CSeq: `${options.cseq ?? 1} ${method}`,
      Contact: `<sip:alice@${this.address}:${this.port}>`,
      ...options.headers,
    };
    const body = options.body ?? '';
    return `${method} ${options.uri ?? 'sip:100@127.0.0.1'} SIP/2.0\r\n${Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  }

  send(text: string, port: number): void {
    this.socket.send(Buffer.from(text), port, '127.0.0.1');
  }

  /** Everything received so far for `callId`, in order (all of it without a Call-ID). */
  messages(callId?: string): string[] {
    return callId === undefined
      ? [...this.received]
      : this.received.filter((text) => text.includes(`\r\nCall-ID: ${callId}\r\n`));
  }

  /** Waits until a message for `callId` matches `pattern`; returns it. */
  async waitFor(callId: string, pattern: RegExp, timeoutMs = 2000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages(callId).find((text) => pattern.test(text));
      if (found !== undefined) return found;
      if (Date.now() > deadline)
        throw new Error(
          `nothing matching ${String(pattern)} for ${callId}; got:\n${this.messages(callId).join('\n---\n')}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  close(): void {
    this.socket.close();
  }
}

export const callIdOf = (text: string): string => /\r\nCall-ID: (\S+)\r\n/.exec(text)?.[1] ?? '';
