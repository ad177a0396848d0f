/**
 * callgate's own re-INVITE (hold) answered 200 by a caller that keeps retransmitting the 200, over
 * UDP on loopback. RFC 3261 section 13.2.2.4 (with RFC 6026 Timer M): every retransmitted 2xx is
 * ACKed again, the same ACK, for 64*T1; then the transaction is gone. Before, only the first 200
 * was ACKed and the caller, seeing no ACK, would end the call after 64*T1.
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

/** The peer's 200 to a request: its Via, From, To (with a tag), Call-ID and CSeq, and an SDP answer. */
function okTo(request: string, body: string): string {
  const lines = request.split('\r\n');
  const copied = lines.filter((line) => /^(Via|From|Call-ID|CSeq):/.test(line));
  const to = lines.find((line) => line.startsWith('To:')) ?? 'To: <sip:alice@127.0.0.1>';
  return [
    'SIP/2.0 200 OK',
    ...copied,
    `${to};tag=a1`,
    'Contact: <sip:alice@127.0.0.1>',
    'Content-Type: application/sdp',
    `Content-Length: ${body.length}`,
    '',
    body,
  ].join('\r\n');
}

describe('when the caller retransmits its 200 to callgate re-INVITE', () => {
  it('should ACK each copy with the same ACK, then keep nothing after 64*T1', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `own-reinvite-${Date.now()}`;
    await confirmedCall(harness, callId);
    const held = harness.calls[0]?.dialog.reinvite({ hold: true });
    const invite = await harness.peer.waitFor(callId, /^INVITE /);
    const ok = okTo(invite, sdp(4000, 'a=recvonly\r\n'));
    harness.peer.send(ok, harness.port);
    await expect(held).resolves.toMatchObject({ held: true, direction: 'sendonly' });
    const acks = (): string[] =>
      harness.peer.messages(callId).filter((text) => text.startsWith('ACK '));
    await waitUntil(() => acks().length === 1);
    for (let i = 0; i < 3; i++) {
      harness.peer.send(ok, harness.port);
      await waitUntil(() => acks().length === i + 2);
    }
    expect(new Set(acks()).size).toBe(1);
    expect(acks()[0]).toMatch(/\r\nCSeq: 2 ACK\r\n/);
    await sleep(TIMEOUT_64_T1_MS + 100);
    expect(harness.driver.retainedState().clientTransactions).toBe(0);
    // Past Timer M a stray 200 is not ACKed any more (nothing is left to match it).
    harness.peer.send(ok, harness.port);
    await sleep(50);
    expect(acks()).toHaveLength(4);
  });
});
