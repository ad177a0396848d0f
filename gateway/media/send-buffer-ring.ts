/**
 * Buffers for outgoing RTP datagrams, written again instead of allocated per packet (a pooled
 * Buffer per packet is an object, a share of an 8 KB pool and garbage, 50 times a second per call).
 * A datagram's bytes must stay as they are until the kernel has them: Node writes a UDP datagram at
 * once when the socket can take it and queues it, buffer and all, only when the socket would block.
 * So a buffer is written again only while the socket has nothing queued; with anything queued the
 * ring lets go of all its buffers (the queued sends keep them) and starts over on fresh ones. Pure:
 * the socket's queue is read through the function it is given.
 */
export class SendBufferRing {
  private readonly slots: Array<Buffer | undefined>;
  private next = 0;

  /**
   * `size` must exceed the packets taken before the first of them is sent (a tick prepares up to
   * MAX_CATCH_UP_FRAMES and its flush sends them), or a packet would be overwritten before it leaves.
   */
  constructor(
    private readonly queuedSends: () => number,
    size: number,
  ) {
    this.slots = new Array<Buffer | undefined>(size).fill(undefined);
  }

  /** A buffer of `length` bytes (contents undefined) for the next datagram; send it before taking `size` more. */
  take(length: number): Buffer {
    if (this.queuedSends() > 0) this.slots.fill(undefined);
    const index = this.next;
    this.next = index + 1 === this.slots.length ? 0 : index + 1;
    const reused = this.slots[index];
    if (reused !== undefined && reused.length === length) return reused;
    const buffer = Buffer.allocUnsafe(length);
    this.slots[index] = buffer;
    return buffer;
  }
}
