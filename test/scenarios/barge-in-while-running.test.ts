/**
 * Race: the caller talks over the agent while their booking is RUNNING at the system of record.
 * The agent's response is cancelled and its audio stops at once on the wire; the booking is not
 * cancelled: it commits once and its result is spoken when the caller is idle again.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { startCallgate, type TimelineEntryView } from '../e2e/callgate-process.ts';
import { sandboxMessages } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'barge-in-while-running',
  greeting: 'Hello.',
  fallback: 'Sorry, go ahead.',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'sushi-kaito',
            date: '2031-07-09',
            time: '18:30',
            party_size: 3,
            name: 'Alan Turing',
          },
        },
      ],
    },
  },
  // Long enough to be talked over.
  toolOutputs: {
    book_table:
      'I am booking your table now. This can take a moment, so please stay on the line while I confirm it with the restaurant for you.',
  },
  systemMessage: 'Your table is confirmed.',
};

/** The booking stays RUNNING this long (below the provider's 5 s timeout): the barge-in falls inside it. */
const BOOKING_LATENCY_MS = 4_000;
const CALLER_TALKS_MS = 1_200;
/** Long enough that a loaded machine still tells the result by voice before the caller hangs up. */
const CALL_MS = 24_000;

const own = closeAfterEach();

function find(
  timeline: readonly TimelineEntryView[],
  source: string,
  type: string,
  match: (e: TimelineEntryView) => boolean = () => true,
): TimelineEntryView | undefined {
  return timeline.find((e) => e.source === source && e.type === type && match(e));
}

describe('when the caller barges in while the booking is RUNNING', () => {
  it(
    'should stop the agent’s audio and cancel its response, but neither cancel nor repeat the booking',
    { timeout: 90_000 },
    async () => {
      const cg = own(await startCallgate({ script: SCRIPT, agent: 'reservations' }));
      await cg.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp } = await dial(cg.sipPort, { service: '1000', holdMs: CALL_MS, own });
      const call = await cg.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      rtp.press('1');

      // The follow-up response (the long tool output line) is playing: the caller talks over it.
      const toolCall = await waitFor(
        async () => find(await cg.timeline(call.session_id), 'call', 'tool_call'),
        8_000,
        'the booking tool call',
      );
      const followUp = await waitFor(
        async () =>
          find(
            await cg.timeline(call.session_id),
            'call',
            'response',
            (e) => e.detail.state === 'created' && e.at >= toolCall.at,
          ),
        5_000,
        'the follow-up response',
      );
      await waitFor(
        async () => (rtp.audibleSince(followUp.at) >= 25 ? true : undefined),
        5_000,
        'half a second of the follow-up',
      );
      const talkedAt = Date.now();
      rtp.speak(CALLER_TALKS_MS);

      const bargeIn = await waitFor(
        async () => find(await cg.timeline(call.session_id), 'call', 'barge_in'),
        5_000,
        'the barge-in',
      );
      expect(bargeIn.detail.playedMs).toBeGreaterThan(0);
      // The model streams at speaking pace, so little is queued at any instant: what counts is the wire below.
      expect(bargeIn.detail.itemId).toEqual(expect.any(String));
      const booking = (await cg.operations(call.session_id)).find(
        (op) => op.action === 'book_table',
      );
      expect(booking?.state).toBe('RUNNING');

      // On the wire: the agent's audio stops while the caller is still talking.
      await new Promise((resolve) =>
        setTimeout(resolve, Math.max(0, talkedAt + CALLER_TALKS_MS - Date.now())),
      );
      expect(rtp.audibleSince(bargeIn.at + 200, talkedAt + CALLER_TALKS_MS)).toBe(0);

      const delivered = await cg.delivered(
        call.session_id,
        (o) => o.action === 'book_table',
        20_000,
      );
      const result = await sipp;
      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      // The booking: committed once, never cancelled, told by voice after the barge-in.
      expect(delivered.state).toBe('COMMITTED');
      // The gate's reasons and the call's timeline say why, when a loaded machine sends it out of band.
      expect(
        delivered.delivery,
        JSON.stringify({
          delivery: delivered.delivery,
          timeline: await cg.timeline(call.session_id),
        }),
      ).toMatchObject({ decision: 'spoken', channel: 'voice' });
      const effects = (
        await cg.get<{ effects: { reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects.map((e) => e.reference)).toEqual([delivered.operation_id]);
      expect(await sandboxMessages(cg.sandboxUrl, delivered.operation_id)).toEqual([]);

      const timeline = await cg.timeline(call.session_id);
      expect(timeline.filter((e) => e.source === 'operation').map((e) => e.type)).toEqual([
        'operation_requested',
        'operation_admitted',
        'operation_running',
        'operation_committed',
      ]);
      // The interrupted response ended cancelled; the result was spoken in a later, completed one.
      expect(
        find(
          timeline,
          'call',
          'response',
          (e) => e.detail.state === 'done' && e.detail.responseId === followUp.detail.responseId,
        )?.detail.status,
      ).toBe('cancelled');
      const spoken = find(timeline, 'call', 'result_spoken');
      expect(spoken?.detail).toMatchObject({
        operationId: delivered.operation_id,
        status: 'completed',
      });
      const order = [
        bargeIn.at,
        find(timeline, 'operation', 'operation_committed')?.at ?? NaN,
        spoken?.at ?? NaN,
      ];
      expect([...order].sort((a, b) => a - b)).toEqual(order);
    },
  );
});
