/**
 * RFC 3550 receiver statistics for one source, pure: extended highest sequence number (A.1),
 * expected and lost packets and the fraction lost per report interval (A.3), and interarrival
 * jitter (A.8). They feed RTCP receiver report blocks and the per-call metrics.
 */

/** A forward jump beyond this is a restart, not loss (RFC 3550 A.1's MAX_DROPOUT). */
const MAX_DROPOUT = 3000;
/** A backward jump within this is reordering (RFC 3550 A.1's MAX_MISORDER). */
const MAX_MISORDER = 100;
const SEQ_MOD = 0x10000;

export interface ReceiveReport {
  readonly extendedHighestSequence: number;
  readonly cumulativeLost: number;
  /** Fraction lost since the previous report, in 1/256 (the RTCP field). */
  readonly fractionLost: number;
  /** Interarrival jitter in RTP timestamp units. */
  readonly jitter: number;
}

export class ReceiveStatistics {
  private readonly clockRate: number;
  private started = false;
  private baseSeq = 0;
  private maxSeq = 0;
  private cycles = 0;
  private badSeq = SEQ_MOD + 1;
  private received = 0;
  private expectedPrior = 0;
  private receivedPrior = 0;
  private lastTransit: number | undefined;
  private jitterUnits = 0;

  constructor(clockRate: number) {
    this.clockRate = clockRate;
  }

  /**
   * Records a packet; returns false when its sequence number is a jump not yet confirmed.
   * `measureJitter` is false for telephone-events, whose packets repeat one timestamp.
   */
  update(
    sequenceNumber: number,
    timestamp: number,
    arrivalMs: number,
    measureJitter = true,
  ): boolean {
    if (!this.started) {
      this.restart(sequenceNumber);
      this.started = true;
    } else {
      const delta = (sequenceNumber - this.maxSeq + SEQ_MOD) % SEQ_MOD;
      if (delta < MAX_DROPOUT) {
        if (sequenceNumber < this.maxSeq) this.cycles += SEQ_MOD;
        this.maxSeq = sequenceNumber;
      } else if (delta <= SEQ_MOD - MAX_MISORDER) {
        if (sequenceNumber !== this.badSeq) {
          this.badSeq = (sequenceNumber + 1) % SEQ_MOD;
          return false;
        }
        // Two sequential packets after a big jump: the source restarted.
        this.restart(sequenceNumber);
      }
    }
    this.received++;
    if (!measureJitter) return true;
    const arrival = (arrivalMs * this.clockRate) / 1000;
    const transit = arrival - timestamp;
    if (this.lastTransit !== undefined) {
      let d = Math.abs(transit - this.lastTransit);
      // A timestamp wrap is not jitter.
      if (d > 2 ** 31) d = Math.abs(d - 2 ** 32);
      this.jitterUnits += (d - this.jitterUnits) / 16;
    }
    this.lastTransit = transit;
    return true;
  }

  get jitterMs(): number {
    return (this.jitterUnits * 1000) / this.clockRate;
  }

  get packetsReceived(): number {
    return this.received;
  }

  get expected(): number {
    return this.started ? this.cycles + this.maxSeq - this.baseSeq + 1 : 0;
  }

  get cumulativeLost(): number {
    return Math.max(0, this.expected - this.received);
  }

  /** The numbers of a report block; advances the "since last report" interval. */
  report(): ReceiveReport {
    const expected = this.expected;
    const expectedInterval = expected - this.expectedPrior;
    const receivedInterval = this.received - this.receivedPrior;
    this.expectedPrior = expected;
    this.receivedPrior = this.received;
    const lostInterval = expectedInterval - receivedInterval;
    const fractionLost =
      expectedInterval <= 0 || lostInterval <= 0
        ? 0
        : Math.min(255, Math.floor((lostInterval * 256) / expectedInterval));
    return {
      extendedHighestSequence: (this.cycles + this.maxSeq) >>> 0,
      cumulativeLost: Math.min(0x7fffff, this.cumulativeLost),
      fractionLost,
      jitter: Math.floor(this.jitterUnits) >>> 0,
    };
  }

  private restart(sequenceNumber: number): void {
    this.baseSeq = sequenceNumber;
    this.maxSeq = sequenceNumber;
    this.badSeq = SEQ_MOD + 1;
    this.cycles = 0;
    this.received = 0;
    this.expectedPrior = 0;
    this.receivedPrior = 0;
  }
}
