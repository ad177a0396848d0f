/**
 * Cuts a TCP byte stream into SIP messages by Content-Length (RFC 3261 section 18.3), with limits
 * on the header block and the body so a peer cannot make callgate buffer without bound.
 *
 * Linear in the bytes received however they are chunked: bytes are appended to a buffer that grows
 * by doubling (never concatenated anew per chunk), the search for the end of the headers resumes
 * where the last one stopped, and Content-Length is read once per message. A peer trickling a
 * message one byte per segment costs one copy and one look at each byte.
 */
import type { TransportDropReason } from './sip-transport.ts';

export interface StreamFramerOptions {
  readonly maxHeaderBytes: number;
  readonly maxBodyBytes: number;
}

export type FramerOutput =
  | { readonly type: 'message'; readonly data: Buffer }
  | { readonly type: 'error'; readonly reason: TransportDropReason };

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /^(?:content-length|l)[ \t]*:[ \t]*(\d+)[ \t]*$/im;
/** Storage kept between messages; a larger buffer (one big message) is let go once it is empty. */
const RETAINED_BYTES = 16 * 1024;

export class StreamFramer {
  /** Received bytes live in storage[start, end); storage beyond `end` is free room. */
  private storage: Buffer = Buffer.alloc(0);
  private start = 0;
  private end = 0;
  /** Bytes of the current message already searched for the end of its headers. */
  private scanned = 0;
  /** Length of the current message (headers and body) once its headers are complete. */
  private total: number | undefined;
  private failed = false;

  constructor(private readonly options: StreamFramerOptions) {}

  /** Appends bytes and returns every message they complete; after an error the stream is unusable. */
  push(chunk: Buffer): FramerOutput[] {
    if (this.failed) return [];
    this.append(chunk);
    const out: FramerOutput[] = [];
    for (;;) {
      if (this.total === undefined) {
        if (this.scanned === 0) {
          // CRLF keepalives (RFC 5626 section 3.5.1) between messages carry nothing.
          while (
            this.start < this.end &&
            (this.storage[this.start] === 0x0d || this.storage[this.start] === 0x0a)
          )
            this.start++;
        }
        const available = this.end - this.start;
        if (available === 0) break;
        const pending = this.storage.subarray(this.start, this.end);
        // The end marker may straddle the last search's end: look again from 3 bytes before it.
        const headerEnd = pending.indexOf(
          HEADER_END,
          Math.max(0, this.scanned - (HEADER_END.length - 1)),
        );
        if (headerEnd < 0) {
          this.scanned = available;
          if (available > this.options.maxHeaderBytes) return this.fail(out, 'header-too-large');
          break;
        }
        if (headerEnd > this.options.maxHeaderBytes) return this.fail(out, 'header-too-large');
        const match = CONTENT_LENGTH.exec(pending.toString('latin1', 0, headerEnd));
        if (match === null) return this.fail(out, 'no-content-length');
        const length = Number(match[1]);
        if (length > this.options.maxBodyBytes) return this.fail(out, 'body-too-large');
        this.total = headerEnd + HEADER_END.length + length;
      }
      if (this.end - this.start < this.total) break;
      out.push({
        type: 'message',
        data: Buffer.from(this.storage.subarray(this.start, this.start + this.total)),
      });
      this.start += this.total;
      this.total = undefined;
      this.scanned = 0;
    }
    if (this.start === this.end) this.reset();
    return out;
  }

  private append(chunk: Buffer): void {
    const held = this.end - this.start;
    if (this.end + chunk.length > this.storage.length) {
      const needed = held + chunk.length;
      if (needed <= this.storage.length) {
        // Enough room once the consumed bytes in front are dropped.
        this.storage.copy(this.storage, 0, this.start, this.end);
      } else {
        const grown = Buffer.allocUnsafe(Math.max(needed, this.storage.length * 2, 1024));
        this.storage.copy(grown, 0, this.start, this.end);
        this.storage = grown;
      }
      this.start = 0;
      this.end = held;
    }
    chunk.copy(this.storage, this.end);
    this.end += chunk.length;
  }

  private reset(): void {
    this.start = 0;
    this.end = 0;
    if (this.storage.length > RETAINED_BYTES) this.storage = Buffer.alloc(0);
  }

  private fail(out: FramerOutput[], reason: TransportDropReason): FramerOutput[] {
    this.failed = true;
    this.storage = Buffer.alloc(0);
    this.start = 0;
    this.end = 0;
    out.push({ type: 'error', reason });
    return out;
  }
}
