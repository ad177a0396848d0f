/**
 * Race: the caller talks over the agent while it is still announcing a booking, before the model
 * has asked for it. The response is cancelled, so the tool is never called: nothing is admitted,
 * nothing reaches the system of record, and nothing is told later. (The model proposes; a
 * proposal that was never made admits nothing.)
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate } from '../e2e/callgate-process.ts';

const SCRIPT = {
  name: 'barge-in-before-admission',
  greeting: 'Hello.',
  fallback: 'Sorry, go ahead.',
  digits: {
    '1': {
      // Spoken before the function call goes out: long enough to be talked over.
      say: 'Certainly. I will book a table at Trattoria Roma for two people on the first of March at seven in the evening, under the name Hopper.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'trattoria-roma',
            date: '2032-03-01',
            time: '19:00',
            party_size: 2,
            name: 'Hopper',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Noted.',
};

const CALLER_TALKS_MS = 1_200;

const own = closeAfterEach();

describe('when the caller barges in before the booking is asked for', () => {
  it(
    'should cancel the response so that no operation is admitted and nothing is booked',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: 9_000, own });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 800));
      const pressedAt = Date.now();
      rtp.press('1');
      await waitFor(
        async () => (rtp.audibleSince(pressedAt) >= 40 ? true : undefined),
        8_000,
        'the announcement to play',
      );
      rtp.speak(CALLER_TALKS_MS);
      const bargeIn = await waitFor(
        async () => (await cg.timeline(call.session_id)).find((e) => e.type === 'barge_in'),
        5_000,
        'the barge-in',
      );

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      const timeline = await cg.timeline(call.session_id);
      const announcement = timeline.find(
        (e) => e.type === 'response' && e.detail.state === 'created' && e.at >= pressedAt,
      );
      expect(
        timeline.find(
          (e) =>
            e.type === 'response' &&
            e.detail.state === 'done' &&
            e.detail.responseId === announcement?.detail.responseId,
        )?.detail.status,
      ).toBe('cancelled');
      expect(bargeIn.detail.playedMs).toBeGreaterThan(0);
      // No proposal, so no admission, no effect, nothing to tell.
      expect(timeline.filter((e) => e.type === 'tool_call' || e.type === 'tool_requested')).toEqual(
        [],
      );
      expect(await cg.operations(call.session_id)).toEqual([]);
      const effects = (
        await cg.get<{ effects: unknown[] }>(`${cg.sandboxUrl}/admin/effects?service=bookings`)
      ).effects;
      expect(effects).toEqual([]);
      expect(timeline.find((e) => e.source === 'call' && e.type === 'ended')?.detail).toMatchObject(
        { reason: 'caller_hung_up' },
      );
    },
  );
});
