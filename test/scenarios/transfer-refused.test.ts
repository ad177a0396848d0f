/**
 * The trunk refuses callgate's transfer to a person (REFER answered 603): the call is kept, the
 * agent is told the transfer failed and goes on talking, and the caller is the one who hangs up.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';

const SCRIPT = {
  name: 'transfer-refused',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '3': {
      say: 'Transferring you.',
      tools: [{ name: 'transfer_to_human', arguments: { reason: 'caller asked for a person' } }],
    },
  },
  toolOutputs: {
    transfer_to_human: 'Sorry, nobody can take your call right now. I can keep helping you.',
  },
};

/** How long the caller stays after declining the REFER: the agent's apology is heard within it. */
const AFTER_REFUSAL_MS = 5_000;

const own = closeAfterEach();

describe('when the trunk refuses the transfer to a person', () => {
  it(
    'should keep the call, tell the agent the transfer failed, and let the agent go on speaking',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      const { rtp, sipp } = await dial(cg.sipPort, {
        service: '1000',
        scenario: 'uac-transfer-refused.xml',
        holdMs: AFTER_REFUSAL_MS,
        own,
      });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      rtp.press('3');

      const transfer = await waitFor(
        async () =>
          (await cg.timeline(call.session_id)).find(
            (e) => e.type === 'transfer' && e.source === 'call',
          ),
        10_000,
        'the transfer attempt',
      );
      expect(transfer.detail).toMatchObject({
        target: 'sip:frontdesk@127.0.0.1:5080',
        outcome: { type: 'failed', status: 603 },
      });

      // sipp fails on any unexpected request: no BYE came from callgate; the caller's BYE got its 200.
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(
        result.firstLines.filter((line) => /^(sent|received) (REFER|BYE|SIP\/2\.0 603)/.test(line)),
      ).toEqual([
        expect.stringMatching(/^received REFER sip:/),
        'sent SIP/2.0 603 Declined',
        expect.stringMatching(/^sent BYE /),
      ]);

      const timeline = await cg.timeline(call.session_id);
      expect(timeline.find((e) => e.type === 'tool_call')?.detail).toMatchObject({
        name: 'transfer_to_human',
        status: 'failed',
      });
      expect(
        timeline.find((e) => e.source === 'audit' && e.type === 'transfer')?.detail,
      ).toMatchObject({ pending: 0 });
      expect(timeline.find((e) => e.source === 'call' && e.type === 'ended')?.detail).toMatchObject(
        { reason: 'caller_hung_up', dialogReason: 'remote-bye' },
      );
      // The agent kept talking to the caller after the refusal (its apology, over RTP).
      expect(rtp.audibleSince(transfer.at)).toBeGreaterThan(25);
    },
  );
});
