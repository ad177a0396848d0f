/**
 * Delayed offer against the gateway as the product runs it (gateway/main.ts: call sessions, RTP,
 * the simulator): sipp's INVITE has no SDP, the gateway's 200 carries its offer with the RTP port
 * the media layer opened, the ACK carries the answer, and the caller's BYE ends the call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { startCallgate, type CallgateProcess, type CallView } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';

const SCRIPT = { name: 'e2e-delayed-offer', greeting: 'Hello.', fallback: 'Anything else?' };

let callgate: CallgateProcess | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
});

describe('when a caller dials the gateway with an INVITE without SDP', () => {
  it(
    'should answer with an offer on an RTP port of its range, take the ACK answer, and end the call on BYE',
    { timeout: 60_000 },
    async () => {
      const cg = await startCallgate({ script: SCRIPT });
      callgate = cg;
      const result = await runSipp({
        scenario: 'uac-delayed-offer.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: '1000',
        pauseMs: 1_000,
        timeoutSeconds: 30,
      });
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.firstLines).toEqual([
        `sent INVITE sip:1000@127.0.0.1:${cg.sipPort} SIP/2.0`,
        'received SIP/2.0 100 Trying',
        // Ringing while the model session opens: the call is answered once its agent can speak.
        'received SIP/2.0 180 Ringing',
        'received SIP/2.0 200 OK',
        expect.stringMatching(/^sent ACK/),
        expect.stringMatching(/^sent BYE/),
        'received SIP/2.0 200 OK',
      ]);
      // The demo tenant's codecs (PCMU, PCMA, opus) in its order, on a port of rtp.portMin..portMax.
      const offer = /\r?\nm=audio (\d+) RTP\/AVP 0 8 111 101 110\r?\n/.exec(result.trace);
      expect(offer).not.toBeNull();
      const port = Number(offer?.[1]);
      expect(port).toBeGreaterThanOrEqual(20_000);
      expect(port).toBeLessThanOrEqual(29_999);

      const ended = await waitFor(
        async () => (await cg.get<{ recent: CallView[] }>('/v1/calls')).recent[0],
        10_000,
        'the call among the recent ones',
      );
      expect(ended).toMatchObject({ state: 'ended', end_reason: 'caller_hung_up' });
    },
  );
});
