/**
 * Transaction timers with a short T1 (10 ms): what is sent, how often, and when it stops. The clock
 * is faked, so the timings are exact whatever else the machine is doing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClientTransaction } from '../../../gateway/sip/client-transaction.ts';
import { InviteServerTransaction } from '../../../gateway/sip/invite-server-transaction.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import type { SipResponse } from '../../../gateway/sip/message-types.ts';
import { NonInviteServerTransaction } from '../../../gateway/sip/non-invite-server-transaction.ts';
import { T1_MS, T2_MS, T4_MS, resolveTimers } from '../../../gateway/sip/sip-timers.ts';

const timers = resolveTimers({ t1Ms: 10, t2Ms: 40, t4Ms: 50 });
const sleep = async (ms: number): Promise<void> => {
  await vi.advanceTimersByTimeAsync(ms);
};

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function response(status: number, method = 'BYE'): SipResponse {
  const parsed = parseSipMessage(
    `SIP/2.0 ${status} X\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: c\r\nCSeq: 2 ${method}\r\nContent-Length: 0\r\n\r\n`,
  );
  if (!parsed.ok || parsed.value.kind !== 'response') throw new Error('fixture');
  return parsed.value;
}

describe('when the RFC timer values are resolved', () => {
  it('should keep T1 500 ms, T2 4 s, T4 5 s and derive 64*T1 timeouts', () => {
    const rfc = resolveTimers();
    expect([T1_MS, T2_MS, T4_MS]).toEqual([500, 4000, 5000]);
    expect(rfc.transactionTimeout).toBe(32_000);
    expect(rfc.ackTimeout).toBe(32_000);
    expect(rfc.answerTimeout).toBe(120_000);
    expect(rfc.timerK).toBe(5000);
  });
});

describe('when an INVITE server transaction sends 2xx over UDP and no ACK comes', () => {
  it('should retransmit with doubling intervals capped at T2, then report the ACK timeout once', async () => {
    const sent: number[] = [];
    let timeouts = 0;
    let terminated = 0;
    const start = Date.now();
    const transaction = new InviteServerTransaction({
      timers,
      reliable: false,
      send: () => sent.push(Date.now() - start) > 0,
      onRetransmit: () => undefined,
      onAckTimeout: () => timeouts++,
      onTransportError: () => undefined,
      onTerminated: () => terminated++,
    });
    transaction.respond(200, Buffer.from('200'));
    await sleep(timers.ackTimeout + 100);
    expect(timeouts).toBe(1);
    expect(terminated).toBe(1);
    // 10, 20, 40, 40, ... ms gaps within 640 ms: 1 original + about 17 retransmissions.
    expect(sent.length).toBeGreaterThan(10);
    expect(sent.length).toBeLessThan(25);
    const gaps = sent.slice(1).map((t, i) => t - (sent[i] ?? 0));
    expect(Math.max(...gaps)).toBeLessThan(40 + 25);
  });

  it('should stop retransmitting when the dialog reports the ACK', async () => {
    let sent = 0;
    let timeouts = 0;
    const transaction = new InviteServerTransaction({
      timers,
      reliable: false,
      send: () => ++sent > 0,
      onRetransmit: () => undefined,
      onAckTimeout: () => timeouts++,
      onTransportError: () => undefined,
      onTerminated: () => undefined,
    });
    transaction.respond(200, Buffer.from('200'));
    await sleep(35);
    transaction.acknowledge();
    const atAck = sent;
    await sleep(200);
    expect(sent).toBe(atAck);
    expect(timeouts).toBe(0);
  });
});

describe('when an INVITE server transaction sends a non-2xx final response', () => {
  it('should retransmit it (Timer G) until the ACK, then absorb for Timer I and terminate', async () => {
    let sent = 0;
    let terminated = false;
    const transaction = new InviteServerTransaction({
      timers,
      reliable: false,
      send: () => ++sent > 0,
      onRetransmit: () => undefined,
      onAckTimeout: () => undefined,
      onTransportError: () => undefined,
      onTerminated: () => (terminated = true),
    });
    transaction.respond(486, Buffer.from('486'));
    await sleep(45);
    expect(sent).toBeGreaterThanOrEqual(3);
    transaction.receiveAck();
    expect(transaction.state).toBe('confirmed');
    const atAck = sent;
    await sleep(timers.timerI + 30);
    expect(sent).toBe(atAck);
    expect(terminated).toBe(true);
  });

  it('should give up after Timer H without an ACK', async () => {
    let terminated = false;
    const transaction = new InviteServerTransaction({
      timers,
      reliable: true,
      send: () => true,
      onRetransmit: () => undefined,
      onAckTimeout: () => undefined,
      onTransportError: () => undefined,
      onTerminated: () => (terminated = true),
    });
    transaction.respond(404, Buffer.from('404'));
    await sleep(timers.timerH + 50);
    expect(terminated).toBe(true);
  });

  it('should answer a retransmitted INVITE with the last response and never twice the application', () => {
    const sent: string[] = [];
    const transaction = new InviteServerTransaction({
      timers,
      reliable: true,
      send: (d) => sent.push(d.toString()) > 0,
      onRetransmit: () => undefined,
      onAckTimeout: () => undefined,
      onTransportError: () => undefined,
      onTerminated: () => undefined,
    });
    transaction.respond(100, Buffer.from('100'));
    transaction.receiveRetransmission();
    transaction.respond(180, Buffer.from('180'));
    transaction.receiveRetransmission();
    expect(sent).toEqual(['100', '100', '180', '180']);
    transaction.terminate();
  });
});

describe('when a non-INVITE server transaction completes over UDP', () => {
  it('should answer retransmissions from the completed state until Timer J ends it', async () => {
    const sent: string[] = [];
    let terminated = false;
    const transaction = new NonInviteServerTransaction({
      timers,
      reliable: false,
      send: (d) => sent.push(d.toString()) > 0,
      onRetransmit: () => undefined,
      onTerminated: () => (terminated = true),
    });
    transaction.respond(200, Buffer.from('200'));
    transaction.receiveRetransmission();
    expect(sent).toEqual(['200', '200']);
    expect(terminated).toBe(false);
    await sleep(timers.timerJ + 50);
    expect(terminated).toBe(true);
  });
});

describe('when a non-INVITE client transaction gets no answer', () => {
  it('should retransmit (Timer E) and time out after 64*T1 (Timer F)', async () => {
    let sent = 0;
    const transaction = new ClientTransaction({
      invite: false,
      request: Buffer.from('BYE'),
      timers,
      reliable: false,
      send: () => ++sent > 0,
      onRetransmit: () => undefined,
      onTerminated: () => undefined,
    });
    transaction.start();
    await sleep(timers.transactionTimeout + 10);
    expect(await transaction.outcome).toEqual({ type: 'timeout' });
    // 10, 20, 40, 40, ... ms gaps within 640 ms: 1 original + 17 retransmissions.
    expect(sent).toBe(18);
  });

  it('should send once over TCP and still time out', async () => {
    let sent = 0;
    const transaction = new ClientTransaction({
      invite: false,
      request: Buffer.from('BYE'),
      timers,
      reliable: true,
      send: () => ++sent > 0,
      onRetransmit: () => undefined,
      onTerminated: () => undefined,
    });
    transaction.start();
    await sleep(timers.transactionTimeout + 10);
    expect(await transaction.outcome).toEqual({ type: 'timeout' });
    expect(sent).toBe(1);
  });
});

describe('when a client transaction gets its final response', () => {
  it('should resolve with it, stop retransmitting and absorb late copies for Timer K', async () => {
    let sent = 0;
    let terminated = false;
    const transaction = new ClientTransaction({
      invite: false,
      request: Buffer.from('BYE'),
      timers,
      reliable: false,
      send: () => ++sent > 0,
      onRetransmit: () => undefined,
      onTerminated: () => (terminated = true),
    });
    transaction.start();
    transaction.receiveResponse(response(200));
    const outcome = await transaction.outcome;
    expect(outcome.type === 'response' && outcome.response.status).toBe(200);
    const atFinal = sent;
    transaction.receiveResponse(response(200));
    await sleep(timers.timerK + 30);
    expect(sent).toBe(atFinal);
    expect(terminated).toBe(true);
  });

  it('should ACK a non-2xx to a re-INVITE and repeat the ACK for a retransmitted response', async () => {
    const sent: string[] = [];
    const transaction = new ClientTransaction({
      invite: true,
      request: Buffer.from('INVITE'),
      timers,
      reliable: false,
      send: (d) => sent.push(d.toString()) > 0,
      buildAck: () => Buffer.from('ACK'),
      onRetransmit: () => undefined,
      onTerminated: () => undefined,
    });
    transaction.start();
    transaction.receiveResponse(response(100, 'INVITE'));
    transaction.receiveResponse(response(491, 'INVITE'));
    transaction.receiveResponse(response(491, 'INVITE'));
    const outcome = await transaction.outcome;
    expect(outcome.type === 'response' && outcome.response.status).toBe(491);
    expect(sent.filter((s) => s === 'ACK')).toHaveLength(2);
    transaction.terminate();
  });
});
