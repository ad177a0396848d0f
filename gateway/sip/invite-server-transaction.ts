/**
 * INVITE server transaction (RFC 3261 section 17.2.1 with the RFC 6026 Accepted state). It
 * absorbs INVITE retransmissions by resending the last response, retransmits a 2xx until the
 * dialog reports the ACK (or gives up after 64*T1 and reports it), and runs Timers G, H and I for
 * non-2xx answers.
 */
import type { SipTimers } from './sip-timers.ts';
import { TransactionTimer } from './transaction-timer.ts';

export type InviteServerState =
  'proceeding' | 'accepted' | 'completed' | 'confirmed' | 'terminated';

export interface InviteServerTransactionOptions {
  readonly timers: SipTimers;
  /** TCP: the transport retransmits, so Timers G and I do not run and 2xx is sent once. */
  readonly reliable: boolean;
  /** False when the transport refused the message: the transaction ends and reports it. */
  readonly send: (data: Buffer) => boolean;
  /** A response was sent again (a retransmission callgate made or one asked for by the peer). */
  readonly onRetransmit: () => void;
  /** No ACK arrived for the 2xx within 64*T1: the dialog must send BYE. */
  readonly onAckTimeout: () => void;
  /**
   * A response could not be sent (RFC 3261 section 17.2.4): the transaction has ended and the
   * dialog must not wait for an ACK or an answer that can no longer go out.
   */
  readonly onTransportError: () => void;
  readonly onTerminated: () => void;
}

export class InviteServerTransaction {
  private current: InviteServerState = 'proceeding';
  private lastResponse: Buffer | undefined;
  private readonly timer = new TransactionTimer();

  constructor(private readonly options: InviteServerTransactionOptions) {}

  get state(): InviteServerState {
    return this.current;
  }

  /** Whether a final response was already sent (CANCEL then only gets its own 200). */
  get answered(): boolean {
    return this.current !== 'proceeding';
  }

  respond(status: number, data: Buffer): void {
    if (this.current !== 'proceeding') return;
    this.lastResponse = data;
    if (!this.send(data)) return;
    if (status < 200) return;
    const { timers, reliable } = this.options;
    if (status < 300) {
      this.current = 'accepted';
      if (!reliable) this.retransmit(timers.t1, timers.t2);
      this.timer.after(timers.ackTimeout, () => {
        if (this.current !== 'accepted') return;
        this.terminate();
        this.options.onAckTimeout();
      });
      return;
    }
    this.current = 'completed';
    if (!reliable) this.retransmit(timers.t1, timers.t2);
    // Timer H: without an ACK the transaction ends anyway.
    this.timer.after(timers.timerH, () => this.terminate());
  }

  /** Timer G for non-2xx, and the 2xx retransmission the UAS core owes until the ACK (17.2.1, 13.3.1.4). */
  private retransmit(interval: number, cap: number): void {
    this.timer.after(interval, () => {
      if (
        (this.current !== 'accepted' && this.current !== 'completed') ||
        this.lastResponse === undefined
      )
        return;
      if (!this.send(this.lastResponse)) return;
      this.options.onRetransmit();
      this.retransmit(Math.min(interval * 2, cap), cap);
    });
  }

  /** The peer sent the INVITE again: repeat the last response, never deliver it twice. */
  receiveRetransmission(): void {
    if (
      this.lastResponse === undefined ||
      this.current === 'confirmed' ||
      this.current === 'terminated'
    )
      return;
    if (!this.send(this.lastResponse)) return;
    this.options.onRetransmit();
  }

  /** Sends through the transport; a refusal ends the transaction and is reported. */
  private send(data: Buffer): boolean {
    if (this.options.send(data)) return true;
    this.terminate();
    this.options.onTransportError();
    return false;
  }

  /** ACK for a non-2xx final response (same branch as the INVITE). */
  receiveAck(): void {
    if (this.current !== 'completed') return;
    this.current = 'confirmed';
    this.timer.clear();
    // Timer I absorbs ACK retransmissions; zero on TCP.
    if (this.options.reliable) this.terminate();
    else this.timer.after(this.options.timers.timerI, () => this.terminate());
  }

  /** The dialog matched the ACK of the 2xx: stop retransmitting. */
  acknowledge(): void {
    if (this.current !== 'accepted') return;
    this.timer.clear();
    this.current = 'confirmed';
    // Keep absorbing INVITE retransmissions that crossed the 2xx for a short while.
    this.timer.after(this.options.timers.timerI, () => this.terminate());
  }

  terminate(): void {
    if (this.current === 'terminated') return;
    this.current = 'terminated';
    this.timer.clear();
    this.options.onTerminated();
  }
}
