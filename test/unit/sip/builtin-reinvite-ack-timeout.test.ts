/**
 * A caller's re-INVITE whose 2xx is never ACKed, over UDP on loopback. RFC 3261 sections 13.3.1.4
 * and 14.2: after 64*T1 of retransmitting the 2xx the UAS ends the session with BYE, as for the
 * first INVITE. Before, the timeout reached nobody: the dialog waited for that ACK forever and
 * answered every later re-INVITE (and session refresh) 491, and callgate's own re-INVITE threw.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  confirmedCall,
  sdp,
  sleep,
  startBuiltin,
  TIMEOUT_64_T1_MS,
  waitUntil,
  type BuiltinHarness,
} from './builtin-harness.ts';

let h: BuiltinHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const reinvite200 = /^SIP\/2\.0 200 [\s\S]*\r\nCSeq: 2 INVITE\r\n/;

describe('when the caller never ACKs the 200 to its re-INVITE', () => {
  it('should stop retransmitting the 200 after 64*T1 and end the call with BYE', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `reinvite-noack-${Date.now()}`;
    const { toTag } = await confirmedCall(harness, callId);
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 2,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4002),
      }),
      harness.port,
    );
    await harness.peer.waitFor(callId, reinvite200);
    const bye = await harness.peer.waitFor(callId, /^BYE /, TIMEOUT_64_T1_MS * 3);
    expect(bye).toMatch(/\r\nCSeq: 2 BYE\r\n/);
    const events = harness.events.get(callId) ?? [];
    expect(events.map((event) => event.type)).toEqual(['ack', 'reinvite', 'ended']);
    expect(events[2]).toEqual({ type: 'ended', reason: 'ack-timeout' });
    const retransmitted = harness.peer
      .messages(callId)
      .filter((text) => reinvite200.test(text)).length;
    await sleep(TIMEOUT_64_T1_MS / 2);
    expect(harness.peer.messages(callId).filter((text) => reinvite200.test(text)).length).toBe(
      retransmitted,
    );
    // The BYE's 200 ends its transaction; the re-INVITE's ended at its timeout.
    harness.peer.send(
      `SIP/2.0 200 OK\r\n${bye
        .split('\r\n')
        .filter((line) => /^(Via|From|To|Call-ID|CSeq):/.test(line))
        .join('\r\n')}\r\nContent-Length: 0\r\n\r\n`,
      harness.port,
    );
    await waitUntil(
      () =>
        harness.driver.retainedState().clientTransactions === 0 &&
        harness.driver.retainedState().serverTransactions === 0,
      1000,
    );
    expect(harness.driver.retainedState()).toEqual({
      dialogs: 0,
      serverTransactions: 0,
      clientTransactions: 0,
      pendingInvites: 0,
    });
  });

  it('should answer a second offer 491 only while the first 200 waits for its ACK, and not after the timeout', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `reinvite-491-${Date.now()}`;
    const { toTag } = await confirmedCall(harness, callId);
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 2,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4002),
      }),
      harness.port,
    );
    await harness.peer.waitFor(callId, reinvite200);
    // While the 200 waits for its ACK, another offer is a glare: 491 (RFC 3261 section 14.2).
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 3,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4004),
      }),
      harness.port,
    );
    await harness.peer.waitFor(callId, /^SIP\/2\.0 491 [\s\S]*\r\nCSeq: 3 INVITE\r\n/);
    await harness.peer.waitFor(callId, /^BYE /, TIMEOUT_64_T1_MS * 3);
    // After the timeout the dialog is gone, not stuck: a new offer is 481, not 491 forever.
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 4,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4006),
      }),
      harness.port,
    );
    await harness.peer.waitFor(callId, /^SIP\/2\.0 481 [\s\S]*\r\nCSeq: 4 INVITE\r\n/);
    expect(harness.driver.dialogCount()).toBe(0);
  });
});
