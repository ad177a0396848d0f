/**
 * Hands out RTP ports per call: even ports from the configured range (RTCP takes the odd port
 * above, RFC 3550 §11), released at hang-up. Allocation walks the range round-robin, so a port
 * just released is the last to be reused and stray packets of an old call do not land in a new one.
 * Exhaustion is a CallgateError the signaling layer answers with 503.
 */
import { CallgateError } from '../../config/errors.ts';

export interface RtpPortAllocatorOptions {
  readonly portMin: number;
  readonly portMax: number;
}

export class RtpPortAllocator {
  private readonly portMin: number;
  private readonly portMax: number;
  private readonly firstPort: number;
  private readonly slots: number;
  private readonly used = new Set<number>();
  private cursor = 0;

  constructor(options: RtpPortAllocatorOptions) {
    this.portMin = options.portMin;
    this.portMax = options.portMax;
    this.firstPort = options.portMin % 2 === 0 ? options.portMin : options.portMin + 1;
    // Each slot needs the even port and the odd one above it inside the range.
    this.slots = Math.max(0, Math.floor((options.portMax - this.firstPort + 1) / 2));
  }

  /** An even RTP port whose RTCP port (+1) is also free; throws CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED. */
  allocate(): number {
    for (let tried = 0; tried < this.slots; tried++) {
      const port = this.firstPort + 2 * this.cursor;
      this.cursor = (this.cursor + 1) % this.slots;
      if (!this.used.has(port)) {
        this.used.add(port);
        return port;
      }
    }
    throw new CallgateError('CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED', {
      portMin: this.portMin,
      portMax: this.portMax,
    });
  }

  release(port: number): void {
    this.used.delete(port);
  }

  get inUse(): number {
    return this.used.size;
  }

  get capacity(): number {
    return this.slots;
  }
}
