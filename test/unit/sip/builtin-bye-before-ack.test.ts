/**
 * The caller's BYE overtakes its ACK of the 200, over UDP on loopback. The BYE proves the 200
 * arrived, and the dialog it was for is gone: callgate stops retransmitting the 200 at once, and
 * the ACK arriving afterwards changes nothing. Before, the ACK found no dialog and was dropped, and
 * the 200 kept going out for 64*T1 for a call that had ended.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  sdp,
  sleep,
  startBuiltin,
  TIMEOUT_64_T1_MS,
  toTagOf,
  waitUntil,
  type BuiltinHarness,
} from './builtin-harness.ts';

let h: BuiltinHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const invite200 = /^SIP\/2\.0 200 [\s\S]*\r\nCSeq: 1 INVITE\r\n/;

describe('when the caller sends BYE before the ACK of the 200', () => {
  it('should answer the BYE, stop retransmitting the 200, and take the late ACK quietly', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `bye-before-ack-${Date.now()}`;
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4000),
      }),
      harness.port,
    );
    const toTag = toTagOf(await harness.peer.waitFor(callId, invite200));
    harness.peer.send(harness.peer.request('BYE', { callId, toTag, cseq: 2 }), harness.port);
    await harness.peer.waitFor(callId, /^SIP\/2\.0 200 [\s\S]*\r\nCSeq: 2 BYE\r\n/);
    const sentBeforeAck = harness.peer
      .messages(callId)
      .filter((text) => invite200.test(text)).length;
    harness.peer.send(harness.peer.request('ACK', { callId, toTag }), harness.port);
    await sleep(TIMEOUT_64_T1_MS);
    // At most one 200 that was already on its way when the BYE was handled.
    expect(
      harness.peer.messages(callId).filter((text) => invite200.test(text)).length,
    ).toBeLessThanOrEqual(sentBeforeAck + 1);
    expect((harness.events.get(callId) ?? []).map((event) => event.type)).toEqual(['bye', 'ended']);
    expect(harness.peer.messages(callId).filter((text) => text.startsWith('BYE'))).toEqual([]);
    await waitUntil(() => harness.driver.retainedState().serverTransactions === 0, 1000);
    expect(harness.driver.retainedState()).toEqual({
      dialogs: 0,
      serverTransactions: 0,
      clientTransactions: 0,
      pendingInvites: 0,
    });
  });
});
