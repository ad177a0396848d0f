/**
 * Hands out RTP ports per call: even ports from the configured range (RTCP takes the odd port
 * above, RFC 3550 §11), released at hang-up. Each port is drawn at random from the free ones, so
 * the next call's port cannot be guessed from this one's (test/unit/media/rtp-port-allocator.test.ts).
 * A released port cools down before it is drawn again, while enough others are free, so stray
 * packets of an old call do not land in a new one. Exhaustion is a CallgateError the signaling
 * layer answers with 503.
 */
import { randomInt } from 'node:crypto';
import { CallgateError } from '../../config/errors.ts';

/**
 * Released ports kept out of the draw, oldest first, at most this many and at most half the
 * range (so the draw always has at least half the free ports to choose from). A few seconds of
 * hang-ups at a busy gateway: longer than packets of a finished call stay in flight.
 */
const MAX_COOLING_PORTS = 64;

export interface RtpPortAllocatorOptions {
  readonly portMin: number;
  readonly portMax: number;
  /** A uniform integer in [0, n); crypto.randomInt unless a test needs it seeded. */
  readonly random?: (n: number) => number;
}

export class RtpPortAllocator {
  private readonly portMin: number;
  private readonly portMax: number;
  private readonly firstPort: number;
  private readonly slots: number;
  private readonly random: (n: number) => number;
  private readonly used = new Set<number>();
  /** Slots that may be drawn (unordered: a draw swaps the last one into the drawn place). */
  private readonly free: number[] = [];
  /** Released slots cooling down, oldest first. */
  private readonly cooling: number[] = [];
  private readonly maxCooling: number;

  constructor(options: RtpPortAllocatorOptions) {
    this.portMin = options.portMin;
    this.portMax = options.portMax;
    this.firstPort = options.portMin % 2 === 0 ? options.portMin : options.portMin + 1;
    // Each slot needs the even port and the odd one above it inside the range.
    this.slots = Math.max(0, Math.floor((options.portMax - this.firstPort + 1) / 2));
    this.random = options.random ?? randomInt;
    for (let slot = 0; slot < this.slots; slot++) this.free.push(slot);
    this.maxCooling = Math.min(MAX_COOLING_PORTS, Math.floor(this.slots / 2));
  }

  /** An even RTP port whose RTCP port (+1) is also free; throws CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED. */
  allocate(): number {
    const slot = this.free.length > 0 ? this.draw() : this.cooling.shift();
    if (slot === undefined)
      throw new CallgateError('CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED', {
        portMin: this.portMin,
        portMax: this.portMax,
      });
    const port = this.firstPort + 2 * slot;
    this.used.add(port);
    return port;
  }

  release(port: number): void {
    if (!this.used.delete(port)) return;
    this.cooling.push((port - this.firstPort) / 2);
    if (this.cooling.length > this.maxCooling) this.free.push(this.cooling.shift() as number);
  }

  get inUse(): number {
    return this.used.size;
  }

  get capacity(): number {
    return this.slots;
  }

  private draw(): number {
    const index = this.random(this.free.length);
    const slot = this.free[index] as number;
    const last = this.free.pop() as number;
    if (index < this.free.length) this.free[index] = last;
    return slot;
  }
}
