/**
 * Cuts a TCP byte stream into SIP messages by Content-Length (RFC 3261 section 18.3), with limits
 * on the header block and the body so a peer cannot make callgate buffer without bound.
 */
import type { TransportDropReason } from './sip-transport.ts';

export interface StreamFramerOptions {
  readonly maxHeaderBytes: number;
  readonly maxBodyBytes: number;
}

export type FramerOutput = { readonly type: 'message'; readonly data: Buffer } | { readonly type: 'error'; readonly reason: TransportDropReason };

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /^(?:content-length|l)[ \t]*:[ \t]*(\d+)[ \t]*$/im;

export class StreamFramer {
  private buffer: Buffer = Buffer.alloc(0);
  private failed = false;

  constructor(private readonly options: StreamFramerOptions) {}

  /** Appends bytes and returns every message they complete; after an error the stream is unusable. */
  push(chunk: Buffer): FramerOutput[] {
    if (this.failed) return [];
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const out: FramerOutput[] = [];
    for (;;) {
      let start = 0;
      // CRLF keepalives (RFC 5626 section 3.5.1) between messages carry nothing.
      while (start < this.buffer.length && (this.buffer[start] === 0x0d || this.buffer[start] === 0x0a)) start++;
      if (start > 0) this.buffer = this.buffer.subarray(start);
      if (this.buffer.length === 0) break;
      const headerEnd = this.buffer.indexOf(HEADER_END);
      if (headerEnd < 0) {
        if (this.buffer.length > this.options.maxHeaderBytes) return this.fail(out, 'header-too-large');
        break;
      }
      if (headerEnd > this.options.maxHeaderBytes) return this.fail(out, 'header-too-large');
      const match = CONTENT_LENGTH.exec(this.buffer.toString('latin1', 0, headerEnd));
      if (match === null) return this.fail(out, 'no-content-length');
      const length = Number(match[1]);
      if (length > this.options.maxBodyBytes) return this.fail(out, 'body-too-large');
      const total = headerEnd + 4 + length;
      if (this.buffer.length < total) break;
      out.push({ type: 'message', data: Buffer.from(this.buffer.subarray(0, total)) });
      this.buffer = this.buffer.subarray(total);
    }
    if (this.buffer.length === 0) this.buffer = Buffer.alloc(0);
    return out;
  }

  private fail(out: FramerOutput[], reason: TransportDropReason): FramerOutput[] {
    this.failed = true;
    this.buffer = Buffer.alloc(0);
    out.push({ type: 'error', reason });
    return out;
  }
}
