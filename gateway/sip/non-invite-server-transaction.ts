/**
 * Non-INVITE server transaction (RFC 3261 section 17.2.2): the request reaches the application
 * once; retransmissions get the last response again until Timer J (64*T1 on UDP, 0 on TCP) ends it.
 * A response the transport refuses ends it at once, so it never waits for a Timer J never armed.
 */
import type { SipTimers } from './sip-timers.ts';
import { TransactionTimer } from './transaction-timer.ts';

export interface NonInviteServerTransactionOptions {
  readonly timers: SipTimers;
  readonly reliable: boolean;
  /** False when the transport refused the message: the transaction then ends (RFC 3261 section 17.2.4). */
  readonly send: (data: Buffer) => boolean;
  readonly onRetransmit: () => void;
  readonly onTerminated: () => void;
}

export class NonInviteServerTransaction {
  private lastResponse: Buffer | undefined;
  private completed = false;
  private terminated = false;
  private readonly timer = new TransactionTimer();

  constructor(private readonly options: NonInviteServerTransactionOptions) {}

  respond(status: number, data: Buffer): void {
    if (this.completed || this.terminated) return;
    this.lastResponse = data;
    if (!this.options.send(data)) {
      this.terminate();
      return;
    }
    if (status < 200) return;
    this.completed = true;
    if (this.options.reliable) this.terminate();
    else this.timer.after(this.options.timers.timerJ, () => this.terminate());
  }

  receiveRetransmission(): void {
    if (this.lastResponse === undefined || this.terminated) return;
    if (!this.options.send(this.lastResponse)) {
      this.terminate();
      return;
    }
    this.options.onRetransmit();
  }

  terminate(): void {
    if (this.terminated) return;
    this.terminated = true;
    this.timer.clear();
    this.options.onTerminated();
  }
}
