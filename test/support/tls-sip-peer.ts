/**
 * A bare SIP peer on one TLS connection (node:tls, a real socket) for the TLS tests: it writes
 * requests by hand and collects every message callgate sends on that connection, so a test
 * asserts what went on the wire and on which connection.
 */
import { connect, type ConnectionOptions, type TLSSocket } from 'node:tls';

let sequence = 0;

export interface TlsRequestOptions {
  readonly callId: string;
  readonly uri?: string;
  readonly toTag?: string;
  readonly cseq?: number;
  readonly body?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export class TlsSipPeer {
  readonly received: string[] = [];
  private pending = '';

  private constructor(readonly socket: TLSSocket) {
    socket.on('data', (chunk: Buffer) => this.take(chunk.toString('latin1')));
    socket.on('error', () => undefined);
  }

  /** Connects and completes the handshake; rejects with the handshake's error. */
  static open(port: number, options: ConnectionOptions): Promise<TlsSipPeer> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ...options });
      socket.once('secureConnect', () => resolve(new TlsSipPeer(socket)));
      socket.once('error', reject);
    });
  }

  get localPort(): number {
    return this.socket.localPort ?? 0;
  }

  request(method: string, options: TlsRequestOptions): string {
    sequence += 1;
    const body = options.body ?? '';
    const headers: Record<string, string> = {
      Via: `SIP/2.0/TLS 127.0.0.1:${this.localPort};branch=z9hG4bKtls${process.pid}x${sequence}`,
      'Max-Forwards': '70',
      From: '<sip:alice@example.com>;tag=a1',
      To: `<sip:100@127.0.0.1>${options.toTag !== undefined ? `;tag=${options.toTag}` : ''}`,
      'Call-ID': options.callId,
      CSeq: `${options.cseq ?? 1} ${method}`,
      // Where a new connection would go: a port nothing listens on, so reuse is what works.
      Contact: '<sip:alice@127.0.0.1:9;transport=tls>',
      ...(body.length > 0 ? { 'Content-Type': 'application/sdp' } : {}),
      ...options.headers,
    };
    return `${method} ${options.uri ?? 'sip:100@127.0.0.1'} SIP/2.0\r\n${Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  }

  send(text: string): void {
    this.socket.write(text);
  }

  /** Waits for a message of `callId` matching `pattern` (first line or whole text). */
  async waitFor(callId: string, pattern: RegExp, timeoutMs = 3_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.find(
        (text) => text.includes(`Call-ID: ${callId}\r\n`) && pattern.test(text),
      );
      if (found !== undefined) return found;
      if (Date.now() > deadline)
        throw new Error(
          `no ${String(pattern)} for ${callId}; got:\n${this.received.join('\n---\n')}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  close(): void {
    this.socket.destroy();
  }

  /** Splits the stream by Content-Length, the way RFC 3261 section 18.3 frames it. */
  private take(text: string): void {
    this.pending += text;
    for (;;) {
      const end = this.pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(
        /\r\nContent-Length: *(\d+)/i.exec(this.pending.slice(0, end))?.[1] ?? 0,
      );
      if (this.pending.length < end + 4 + length) return;
      this.received.push(this.pending.slice(0, end + 4 + length));
      this.pending = this.pending.slice(end + 4 + length);
    }
  }
}
