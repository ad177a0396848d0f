/**
 * Race: the caller puts the call on hold (re-INVITE sendonly, answered recvonly: nothing we send
 * reaches them) and their booking commits during the hold. Spoken into the hold it would be
 * recorded as told while nobody heard it. The gate holds it (`caller_on_hold`): it is told once
 * after the resume, its commit-to-audible counted from the resume, or, when the caller hangs up
 * from the hold, sent out of band once.
 */
import { describe, expect, it } from 'vitest';
import type { CallEvent } from '../../gateway/call/call-events.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { messagesOnceSettled, sandboxMessages } from '../support/sandbox-messages.ts';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.ts';
import { placeCall, type PlacedCall } from './place-call.ts';

const SCRIPT = {
  name: 'result-during-hold',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'bistro-nord',
            date: '2031-06-05',
            time: '20:30',
            party_size: 2,
            name: 'Ada Lovelace',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking commits this long after the key press, well inside the hold. */
const BOOKING_LATENCY_MS = 800;
/** The hold (sipp's pause between the hold and the resume or the hang-up). */
const HOLD_MS = 5_000;

const own = closeAfterEach();

interface HeldBooking {
  readonly gw: InProcessGateway;
  readonly placed: PlacedCall;
  readonly sessionId: string;
  readonly operationId: string;
  readonly heardResult: () => number;
  readonly eventAt: (predicate: (event: CallEvent) => boolean) => number | undefined;
}

/** Dials with the given sipp scenario, presses 1 once the call is held, and waits for the gate's hold. */
async function bookDuringHold(scenario: string): Promise<HeldBooking> {
  const gw = own(await startInProcessGateway({ script: SCRIPT }));
  await gw.addFault({
    fault: `latency=${BOOKING_LATENCY_MS}`,
    service: 'bookings',
    operation: 'book',
  });
  const placed = await placeCall(gw, {
    scenario,
    holdMs: HOLD_MS,
    timeoutSeconds: 60,
    own,
    hearGreeting: false,
  });
  const call = await waitFor(async () => gw.sessions[0], 5_000, 'the call session');
  const eventAt = (predicate: (event: CallEvent) => boolean) =>
    gw.events.find((e) => e.sessionId === call.sessionId && predicate(e.event))?.at;
  await waitFor(
    async () => eventAt((e) => e.type === 'hold' && e.state === 'held'),
    10_000,
    'the hold',
  );
  placed.rtp.press('1');
  const operationId = await waitFor(
    async () => [...call.agent.operations.keys()][0],
    8_000,
    'the booking',
  );
  const heardResult = () =>
    placed.model.session.heard.filter(
      (r) => r.kind === 'system_message' && r.text.includes(operationId),
    ).length;
  const decision = await waitFor(
    async () =>
      (await gw.agents.audit.read(call.sessionId))
        .map((r) => r.event)
        .find((e) => e.type === 'gate_decision' && e.operationId === operationId),
    8_000,
    'the gate decision during the hold',
  );
  // Still held when the result came: not spoken into the hold.
  expect(eventAt((e) => e.type === 'hold' && e.state === 'resumed')).toBeUndefined();
  expect(decision).toMatchObject({ decision: 'hold', reasons: ['committed', 'caller_on_hold'] });
  expect(heardResult()).toBe(0);
  return { gw, placed, sessionId: call.sessionId, operationId, heardResult, eventAt };
}

describe('when a booking commits while the caller holds the call, and the caller resumes', () => {
  it(
    'should hold the result, tell it once after the resume, and count commit-to-audible from the resume',
    { timeout: 90_000 },
    async () => {
      const { gw, placed, sessionId, operationId, heardResult, eventAt } = await bookDuringHold(
        'uac-hold-resume-external-rtp.xml',
      );
      const ledger = gw.agents.h.layer.ledger;
      expect((await ledger.get('demo', operationId))?.delivery?.delivered).not.toBe(true);

      const op = await gw.delivered(operationId, 20_000);
      const resumedAt = eventAt((e) => e.type === 'hold' && e.state === 'resumed') ?? NaN;
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
      expect(op.delivery?.at).toBeGreaterThan(resumedAt);
      expect(heardResult()).toBe(1);
      // From the resume: the first packet went out after it and before the record. Counted from the
      // commit, seconds inside the hold, it would exceed that span by the rest of the hold.
      const audibleMs = op.delivery?.commitToAudibleMs ?? NaN;
      expect(resumedAt - (op.committedAt ?? resumedAt)).toBeGreaterThan(2_000);
      expect(audibleMs).toBeGreaterThanOrEqual(0);
      expect(audibleMs).toBeLessThan((op.delivery?.at ?? 0) - resumedAt);
      const audit = (await gw.agents.audit.read(sessionId)).map((r) => r.event);
      expect(
        audit
          .filter((e) => e.type === 'delivered')
          .map((e) => (e.type === 'delivered' ? e.channel : undefined)),
      ).toEqual(['voice']);
      expect(await sandboxMessages(gw.sandboxUrl, operationId)).toHaveLength(0);

      placed.rtp.mute();
      const result = await placed.sipp;
      expect(result.exitCode, result.stderr).toBe(0);
    },
  );
});

describe('when a booking commits while the caller holds the call, and the caller hangs up from the hold', () => {
  it(
    'should never speak it, and send it out of band exactly once',
    { timeout: 90_000 },
    async () => {
      const { gw, placed, sessionId, operationId, heardResult } = await bookDuringHold(
        'uac-hold-hangup-external-rtp.xml',
      );
      const result = await placed.sipp;
      placed.rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      const op = await gw.delivered(operationId, 20_000);
      expect(op.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
      });
      expect(op.delivery?.reasons).toContain('caller_hung_up');
      expect(heardResult()).toBe(0);
      expect(await messagesOnceSettled(gw.sandboxUrl, operationId)).toHaveLength(1);
      const audit = (await gw.agents.audit.read(sessionId)).map((r) => r.event);
      expect(
        audit
          .filter((e) => e.type === 'delivered')
          .map((e) => (e.type === 'delivered' ? e.channel : undefined)),
      ).toEqual(['out_of_band']);
    },
  );
});
