/**
 * Write-once chunks for the payload bytes jitter buffers hold (payload-store.ts): a chunk is filled
 * front to back and then replaced, never rewritten, so a view of it handed out stays as it was for
 * as long as anyone keeps it.
 */

/**
 * Bytes per chunk: 8 KB, the size of Node's Buffer pool, which the pooled copy this replaced came
 * from. Chunks are shared by every store in the process, as that pool is: with many calls a chunk
 * fills within milliseconds and dies young once its frames are played. One chunk per call would
 * take a second to fill, outlive two scavenges, and its 8 KB of external memory per call and
 * second would pile up in the old generation until a full collection (the callgrind driver at
 * 100 calls: +175 instructions of collector work per frame, against +0 shared).
 */
const CHUNK_BYTES = 8192;
/** Payloads start on 8-byte boundaries, as in Node's Buffer pool: a view can be read as wider samples. */
const ALIGN_MASK = 7;

/** Write-once chunks: where payload bytes go; a chunk is replaced when full, never rewritten. */
export class PayloadArena {
  private current: Buffer = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  /** Bytes of the current chunk written so far; the rest has never been handed out. */
  private used = 0;

  /** The chunk the last `write()` went to. */
  get chunk(): Buffer {
    return this.current;
  }

  /** Copies the bytes into the current chunk (a new one when they do not fit); returns where they start. */
  write(bytes: Buffer): number {
    const length = bytes.length;
    if (this.used + length > this.current.length) {
      this.current = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, length));
      this.used = 0;
    }
    const offset = this.used;
    this.current.set(bytes, offset);
    this.used = (offset + length + ALIGN_MASK) & ~ALIGN_MASK;
    return offset;
  }
}

/** The arena every jitter buffer writes into unless given its own (tests). */
export const sharedPayloadArena = new PayloadArena();
