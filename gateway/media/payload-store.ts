/**
 * Payload bytes of the packets a jitter buffer holds, written once into long-lived chunks and
 * handed out as views, so that held audio is not young objects and whole datagrams that every
 * scavenge copies, and a played frame costs no second copy. Pure.
 *
 * Bytes are never written twice: a chunk is filled front to back and then replaced by a new one,
 * so a view handed out stays as it was for as long as anyone keeps it (the model side batches
 * frames, a recording keeps them all).
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

const sharedArena = new PayloadArena();

/** Slots (held payloads) grow when all are taken, keeping what is held; that stops once a stream has settled. */
export class PayloadStore {
  private readonly arena: PayloadArena;
  /** Per slot: the chunk its payload is in (undefined when free, so an old chunk is not kept) and where. */
  private readonly slotChunks: Array<Buffer | undefined> = [];
  private readonly slotOffsets: number[] = [];
  private readonly free: number[] = [];

  /** `arena`: the process-wide one unless a test wants its own. */
  constructor(slots: number, arena: PayloadArena = sharedArena) {
    this.arena = arena;
    this.addSlots(Math.max(1, slots));
  }

  /** Copies the payload in; returns its slot. */
  put(payload: Buffer): number {
    if (this.free.length === 0) this.addSlots(this.slotChunks.length);
    const slot = this.free.pop() as number;
    this.slotOffsets[slot] = this.arena.write(payload);
    this.slotChunks[slot] = this.arena.chunk;
    return slot;
  }

  /**
   * The first `length` bytes of a slot (the slot stays taken), as a view: its bytes are never
   * written again, so the view is the caller's to keep. The pooled copy it replaces cost about
   * 1,200 instructions per frame (Buffer.allocUnsafe, and Buffer#copy, which in Node 20 makes a
   * Uint8Array of its own for the source range), the view about 330.
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
