/**
 * Payload bytes of the packets a jitter buffer holds, in one long-lived buffer of equal slots
 * handed out and taken back through a free list, so that held audio is not young objects and whole
 * datagrams that every scavenge copies. Pure.
 */

/** Bytes per payload slot to start with: 20 ms of G.711. Wider payloads (Opus, 30 ms frames) widen every slot once. */
const INITIAL_PAYLOAD_SLOT_BYTES = 160;

/**
 * Slots widen for a bigger payload and more slots are added when all are taken, keeping what is
 * held; neither happens once a stream has settled.
 */
export class PayloadStore {
  private bytes: Buffer;
  private slotBytes = INITIAL_PAYLOAD_SLOT_BYTES;
  private slotCount: number;
  private readonly free: number[] = [];

  constructor(slots: number) {
    this.slotCount = Math.max(1, slots);
    this.bytes = Buffer.allocUnsafeSlow(this.slotCount * this.slotBytes);
    this.clear();
  }

  /** Copies the payload in; returns its slot. */
  put(payload: Buffer): number {
    // Doubling: a variable bit rate stream that creeps up widens a few times, not once per new size.
    if (payload.length > this.slotBytes) this.resize(this.slotCount, Math.max(payload.length, this.slotBytes * 2));
    if (this.free.length === 0) this.resize(this.slotCount * 2, this.slotBytes);
    const slot = this.free.pop() as number;
    this.bytes.set(payload, slot * this.slotBytes);
    return slot;
  }

  /** The first `length` bytes of a slot, in a new buffer (the slot stays taken). */
  copyOut(slot: number, length: number): Buffer {
    const out = Buffer.allocUnsafe(length);
    const start = slot * this.slotBytes;
    this.bytes.copy(out, 0, start, start + length);
    return out;
  }

  release(slot: number): void {
    this.free.push(slot);
  }

  /** Every slot free again. */
  clear(): void {
    this.free.length = 0;
    for (let slot = this.slotCount - 1; slot >= 0; slot--) this.free.push(slot);
  }

  private resize(slotCount: number, slotBytes: number): void {
    const bytes = Buffer.allocUnsafeSlow(slotCount * slotBytes);
    for (let slot = 0; slot < this.slotCount; slot++) this.bytes.copy(bytes, slot * slotBytes, slot * this.slotBytes, (slot + 1) * this.slotBytes);
    for (let slot = slotCount - 1; slot >= this.slotCount; slot--) this.free.unshift(slot);
    this.bytes = bytes;
    this.slotBytes = slotBytes;
    this.slotCount = slotCount;
  }
}
