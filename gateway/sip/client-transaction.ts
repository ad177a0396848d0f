/**
 * Client transactions for the requests callgate sends (RFC 3261 section 17.1): BYE, REFER,
 * OPTIONS, NOTIFY answers and re-INVITE. Non-INVITE: Timer E retransmits on UDP (T1 doubling to
 * T2), Timer F gives up after 64*T1, Timer K absorbs late responses. INVITE: Timer A retransmits,
 * Timer B gives up, a non-2xx is acknowledged here and Timer D absorbs its retransmissions; after a
 * 2xx the transaction stays Accepted for Timer M (RFC 6026) and sends the dialog's ACK again for
 * every retransmitted 2xx (RFC 3261 section 13.2.2.4). A message the transport refuses ends the
 * transaction at once with `transport-error` (section 17.1.1.2 / 17.1.2.2, taken as 503 by 8.1.3.1).
 */
import type { SipResponse } from './message-types.ts';
import type { SipTimers } from './sip-timers.ts';
import { TransactionTimer } from './transaction-timer.ts';

export type ClientOutcome =
  | { readonly type: 'response'; readonly response: SipResponse }
  | { readonly type: 'timeout' }
  /** The transport refused the request (or its retransmission): nothing more will be sent. */
  | { readonly type: 'transport-error' };

export interface ClientTransactionOptions {
  readonly invite: boolean;
  readonly request: Buffer;
  readonly timers: SipTimers;
  readonly reliable: boolean;
  /** False when the transport refused the message. */
  readonly send: (data: Buffer) => boolean;
  /** INVITE only: the ACK for a non-2xx final response (same branch, RFC 3261 section 17.1.1.3). */
  readonly buildAck?: (response: SipResponse) => Buffer;
  /** INVITE only: the dialog's ACK for a 2xx (a new branch, RFC 3261 section 13.2.2.4). */
  readonly build2xxAck?: (response: SipResponse) => Buffer;
  readonly onRetransmit: () => void;
  readonly onProvisional?: (response: SipResponse) => void;
  readonly onTerminated: () => void;
}

export class ClientTransaction {
  private final = false;
  private terminated = false;
  private provisional = false;
  private ack: Buffer | undefined;
  private readonly timer = new TransactionTimer();
  private resolveOutcome: ((outcome: ClientOutcome) => void) | undefined;
  /** Settles with the final response, `timeout` when Timer B/F fires first, or `transport-error`. */
  readonly outcome: Promise<ClientOutcome>;

  constructor(private readonly options: ClientTransactionOptions) {
    this.outcome = new Promise((resolve) => {
      this.resolveOutcome = resolve;
    });
  }

  start(): void {
    const { timers, reliable } = this.options;
    if (!this.send(this.options.request)) return;
    if (!reliable) this.retransmit(timers.t1);
    this.timer.after(timers.transactionTimeout, () => {
      if (this.final) return;
      this.settle({ type: 'timeout' });
      this.terminate();
    });
  }

  private retransmit(interval: number): void {
    this.timer.after(interval, () => {
      if (this.final || this.terminated) return;
      // INVITE stops retransmitting on a provisional response; non-INVITE continues at T2.
      if (this.options.invite && this.provisional) return;
      if (!this.send(this.options.request)) return;
      this.options.onRetransmit();
      const next = this.options.invite
        ? interval * 2
        : this.provisional
          ? this.options.timers.t2
          : Math.min(interval * 2, this.options.timers.t2);
      this.retransmit(next);
    });
  }

  receiveResponse(response: SipResponse): void {
    if (this.terminated) return;
    if (response.status < 200) {
      if (this.final) return;
      this.provisional = true;
      this.options.onProvisional?.(response);
      return;
    }
    if (this.final) {
      // A retransmitted final response: repeat the ACK (Timer D for a non-2xx, Timer M for a 2xx).
      if (this.ack !== undefined && this.send(this.ack)) this.options.onRetransmit();
      return;
    }
    this.final = true;
    this.settle({ type: 'response', response });
    const { timers, reliable } = this.options;
    if (this.options.invite) {
      if (response.status < 300) {
        // RFC 6026 Accepted: the 2xx may come again (its sender retransmits until it sees the ACK).
        this.ack = this.options.build2xxAck?.(response);
        if (this.ack !== undefined && !this.send(this.ack)) return;
        this.timer.clear();
        this.timer.after(timers.transactionTimeout, () => this.terminate());
        return;
      }
      this.ack = this.options.buildAck?.(response);
      if (this.ack !== undefined && !this.send(this.ack)) return;
      if (reliable) this.terminate();
      else this.timer.after(timers.timerD, () => this.terminate());
      return;
    }
    if (reliable) this.terminate();
    else this.timer.after(timers.timerK, () => this.terminate());
  }

  /** Sends through the transport; a refusal settles `transport-error` (unless already settled) and ends. */
  private send(data: Buffer): boolean {
    if (this.options.send(data)) return true;
    this.settle({ type: 'transport-error' });
    this.terminate();
    return false;
  }

  private settle(outcome: ClientOutcome): void {
    const resolve = this.resolveOutcome;
    this.resolveOutcome = undefined;
    resolve?.(outcome);
  }

  terminate(): void {
    if (this.terminated) return;
    this.terminated = true;
    this.timer.clear();
    this.settle({ type: 'timeout' });
    this.options.onTerminated();
  }
}
