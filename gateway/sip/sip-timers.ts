/**
 * RFC 3261 timer values (section 17 and table 4). Production uses the RFC values; tests pass a
 * shorter T1/T2/T4 through `SipTimerOptions` so a 32 s timeout becomes a fraction of a second,
 * and every derived timer keeps its RFC ratio to T1.
 */

/** T1: the round-trip time estimate; the first retransmission interval on UDP. */
export const T1_MS = 500;
/** T2: the cap on non-INVITE and 2xx retransmission intervals (RFC 3261 section 17.1.2.2). */
export const T2_MS = 4000;
/** T4: how long a message may stay in the network; Timers I and K wait this long for strays. */
export const T4_MS = 5000;
/** Timers B, F, H, J and the wait for the ACK of a 2xx are all 64*T1 (32 s with the RFC T1). */
export const TRANSACTION_TIMEOUT_FACTOR = 64;
/**
 * How long an INVITE may wait for the application's answer or rejection before callgate answers
 * 480 itself: 240*T1, 2 minutes with the RFC T1. Below a proxy's Timer C (over 3 minutes, RFC 3261
 * section 16.6) so callgate, not a proxy, ends the attempt; far above the time the application
 * takes to open media and answer. Without it an INVITE the application never settles would hold
 * its dialog and transaction forever.
 */
export const ANSWER_TIMEOUT_FACTOR = 240;

export interface SipTimerOptions {
  readonly t1Ms?: number;
  readonly t2Ms?: number;
  readonly t4Ms?: number;
}

export interface SipTimers {
  readonly t1: number;
  readonly t2: number;
  readonly t4: number;
  /** Timer B (INVITE client) and F (non-INVITE client): give up on a request. */
  readonly transactionTimeout: number;
  /** Timer H: wait for the ACK of a non-2xx final response. */
  readonly timerH: number;
  /** Timer I: absorb ACK retransmissions after the ACK of a non-2xx (UDP only). */
  readonly timerI: number;
  /** Timer J: answer non-INVITE retransmissions from the completed state (UDP only). */
  readonly timerJ: number;
  /** Timer K: absorb response retransmissions in a completed non-INVITE client (UDP only). */
  readonly timerK: number;
  /** Timer D: absorb retransmitted non-2xx responses to a re-INVITE (at least 32 s on UDP). */
  readonly timerD: number;
  /** How long a 2xx to INVITE is retransmitted waiting for its ACK before the call is torn down. */
  readonly ackTimeout: number;
  /** How long an INVITE waits for the application to answer or reject it before callgate answers 480. */
  readonly answerTimeout: number;
}

export function resolveTimers(options: SipTimerOptions = {}): SipTimers {
  const t1 = options.t1Ms ?? T1_MS;
  const t2 = options.t2Ms ?? T2_MS;
  const t4 = options.t4Ms ?? T4_MS;
  const timeout = TRANSACTION_TIMEOUT_FACTOR * t1;
  return {
    t1,
    t2,
    t4,
    transactionTimeout: timeout,
    timerH: timeout,
    timerI: t4,
    timerJ: timeout,
    timerK: t4,
    timerD: timeout,
    ackTimeout: timeout,
    answerTimeout: ANSWER_TIMEOUT_FACTOR * t1,
  };
}
