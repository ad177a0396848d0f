/**
 * Payload bytes of the packets a jitter buffer holds, written once into long-lived chunks and
 * handed out as views, so that held audio is not young objects and whole datagrams that every
 * scavenge copies, and a played frame costs no second copy. No I/O; by default its bytes go to the
 * process-wide arena (payload-arena.ts), as Node's Buffer pool is process-wide.
 *
 * Bytes are never written twice: a chunk is filled front to back and then replaced by a new one,
 * so a view handed out stays as it was for as long as anyone keeps it (the model side batches
 * frames; record mode joins its frames once a second, since a view keeps its whole chunk alive).
 */
import { PayloadArena, sharedPayloadArena } from './payload-arena.ts';

/** Slots (held payloads) grow when all are taken, keeping what is held; that stops once a stream has settled. */
export class PayloadStore {
  private readonly arena: PayloadArena;
  /** Per slot: the chunk its payload is in (undefined when free, so an old chunk is not kept) and where. */
  private readonly slotChunks: Array<Buffer | undefined> = [];
  private readonly slotOffsets: number[] = [];
  private readonly free: number[] = [];

  /** `arena`: the process-wide one unless a test wants its own. */
  constructor(slots: number, arena: PayloadArena = sharedPayloadArena) {
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
