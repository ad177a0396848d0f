/**
 * Payload bytes of the packets a jitter buffer holds, written once into long-lived chunks and
 * handed out as views, so that held audio is not young objects and whole datagrams that every
 * scavenge copies, and a played frame costs no second copy. Pure.
 *
 * Bytes are never written twice: a chunk is filled front to back and then replaced by a new one,
 * so a view handed out stays as it was for as long as anyone keeps it (the model side batches
 * frames, a recording keeps them all), and what a view keeps alive is its own call's chunk.
 */

/**
 * Bytes per chunk: 8 KB, 50 frames of 20 ms G.711 (one second of a call). That is one new chunk
 * per 50 frames, as many as Node's 8 KB Buffer pool needed for a pooled copy per frame, and at
 * most 8 KB per call that nobody references any more.
 */
const CHUNK_BYTES = 8192;
/** Payloads start on 8-byte boundaries, as in Node's Buffer pool: a view can be read as wider samples. */
const ALIGN_MASK = 7;

/** Slots (held payloads) grow when all are taken, keeping what is held; that stops once a stream has settled. */
export class PayloadStore {
  private chunk: Buffer = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  /** Bytes of `chunk` written so far; the rest has never been handed out. */
  private used = 0;
  /** Per slot: the chunk its payload is in (undefined when free, so an old chunk is not kept) and where. */
  private readonly slotChunks: Array<Buffer | undefined> = [];
  private readonly slotOffsets: number[] = [];
  private readonly free: number[] = [];

  constructor(slots: number) {
    this.addSlots(Math.max(1, slots));
  }

  /** Copies the payload in; returns its slot. */
  put(payload: Buffer): number {
    const length = payload.length;
    if (this.used + length > this.chunk.length) {
      this.chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, length));
      this.used = 0;
    }
    if (this.free.length === 0) this.addSlots(this.slotChunks.length);
    const slot = this.free.pop() as number;
    const offset = this.used;
    this.chunk.set(payload, offset);
    this.used = (offset + length + ALIGN_MASK) & ~ALIGN_MASK;
    this.slotChunks[slot] = this.chunk;
    this.slotOffsets[slot] = offset;
    return slot;
  }

  /**
   * The first `length` bytes of a slot (the slot stays taken), as a view: its bytes are never
   * written again, so the view is the caller's to keep. A view instead of a pooled copy saves about
   * 900 instructions per played frame (Buffer.allocUnsafe and Buffer#copy, which in Node 20 makes
   * a Uint8Array of its own for the source range), against about 330 for the view.
   */
  view(slot: number, length: number): Buffer {
    const offset = this.slotOffsets[slot] as number;
    return (this.slotChunks[slot] as Buffer).subarray(offset, offset + length);
  }

  release(slot: number): void {
    this.slotChunks[slot] = undefined;
    this.free.push(slot);
  }

  /** Every slot free again (views handed out stay valid: their bytes are not reused). */
  clear(): void {
    this.free.length = 0;
    for (let slot = this.slotChunks.length - 1; slot >= 0; slot--) {
      this.slotChunks[slot] = undefined;
      this.free.push(slot);
    }
  }

  private addSlots(count: number): void {
    const first = this.slotChunks.length;
    for (let slot = first; slot < first + count; slot++) {
      this.slotChunks.push(undefined);
      this.slotOffsets.push(0);
    }
    // Only called with no slot free: the lowest new slot is handed out first.
    for (let slot = first + count - 1; slot >= first; slot--) this.free.push(slot);
  }
}
