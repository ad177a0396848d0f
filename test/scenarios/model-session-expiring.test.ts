/**
 * Race: the realtime provider announces the end of the model session (session_expiring) while the
 * agent is talking and a booking runs. callgate does not wait for the hard close: it opens a new
 * session with the call's summary and switches at the first quiet moment, so nothing the caller
 * hears is cut, no apology is needed, the booking's result is told once, and the call goes on.
 */
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'model-session-expiring',
  greeting: 'Hello, this is the booking line.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it for you now.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'bistro-nord',
            date: '2031-11-03',
            time: '20:00',
            party_size: 2,
            name: 'Barbara Liskov',
          },
        },
      ],
    },
    '9': { say: 'Still here with you.' },
  },
  toolOutputs: { book_table: 'One moment please while the restaurant confirms.' },
  systemMessage: 'Your table is confirmed.',
};

/**
 * The provider's limit in this test (60 minutes in production), and the warning before it: the
 * warning comes 4 s into every session, so a renewed session is renewed again in turn.
 */
const SESSION_LIMIT_MS = 40_000;
const EXPIRY_WARNING_MS = 36_000;
/** The booking is still RUNNING when the warning comes (below the harness provider timeout, 1 s). */
const BOOKING_LATENCY_MS = 900;

const own = closeAfterEach();

describe('when the model session is about to reach its limit', () => {
  it(
    'should renew it at a quiet moment with the summary, cutting nothing and telling the result once',
    { timeout: 90_000 },
    async () => {
      const gw = own(
        await startInProcessGateway({
          script: SCRIPT,
          session: { sessionLimitMs: SESSION_LIMIT_MS, expiryWarningMs: EXPIRY_WARNING_MS },
          maxSessionMs: SESSION_LIMIT_MS,
          speechSpeed: 1,
        }),
      );
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const { rtp, sipp, model: firstConnection } = await placeCall(gw, { holdMs: 13_000, own });
      const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
      // The key goes in at the greeting's end: the warning (4 s after connect) finds the agent talking about the booking.
      rtp.press('1');
      const second = gw.simulator.nextConnection(12_000);
      const expiring = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'model_expiring'),
        6_000,
        'the expiry warning',
      );
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking to be owned by the call',
      );
      const secondConnection = await second;
      const renewed = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'model_renewed'),
        8_000,
        'the renewal',
      );
      expect(renewed.event).toEqual({ type: 'model_renewed', attempt: 2, agent: 'reservations' });

      // A quiet moment: the agent was not talking when the switch happened; the last response before it had finished.
      const before = gw.events.filter((e) => e.at <= renewed.at && e.event.type === 'response');
      expect(before.at(-1)?.event).toMatchObject({ state: 'done', status: 'completed' });
      expect(renewed.at).toBeGreaterThan(expiring.at);
      // Nothing the old session said was cut, and it was closed by callgate well before the provider's limit.
      expect(firstConnection.session.said.length).toBeGreaterThan(0);
      expect(
        firstConnection.session.said.every(
          (s) => s.status === 'completed' && s.truncatedAtMs === undefined,
        ),
      ).toBe(true);
      expect(renewed.at - expiring.at).toBeLessThan(EXPIRY_WARNING_MS);
      // The new session was told the call so far: its agent and the booking.
      const instructions = String(secondConnection.session.configuration.instructions);
      expect(instructions).toContain('The active agent is reservations');
      expect(instructions).toContain(operationId);

      // The result is told once, on whichever session was live when it came.
      const op = await gw.delivered(operationId);
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
      const told = [firstConnection, secondConnection].flatMap((c) =>
        c.session.heard.filter((r) => r.kind === 'system_message' && r.text.includes(operationId)),
      );
      expect(told).toHaveLength(1);

      // The call goes on with a renewed session: a key pressed now is heard and answered by the live one.
      await waitFor(
        async () =>
          gw.events.some(
            (e) => e.at > renewed.at && e.event.type === 'response' && e.event.state === 'done',
          ) || secondConnection.session.said.length === 0
            ? true
            : undefined,
        10_000,
        'a quiet line',
      );
      const pressedAt = Date.now();
      rtp.press('9');
      const answered = await waitFor(
        async () =>
          gw.simulator.connections.find((c) =>
            c.session.said.some(
              (s) => s.text === 'Still here with you.' && s.status === 'completed',
            ),
          ),
        8_000,
        'the answer on a renewed session',
      );
      expect(answered).not.toBe(firstConnection);
      expect(
        gw.simulator.connections.filter((c) =>
          c.session.heard.some((r) => r.kind === 'dtmf' && r.digit === '9'),
        ),
      ).toEqual([answered]);
      expect(rtp.audibleSince(pressedAt)).toBeGreaterThan(25);

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      // Every renewal (a renewed session expires in turn) came at a quiet moment and cut nothing.
      const renewals = gw.events.filter((e) => e.event.type === 'model_renewed');
      for (const renewal of renewals)
        expect(
          gw.events.filter((e) => e.at <= renewal.at && e.event.type === 'response').at(-1)?.event,
        ).toMatchObject({ state: 'done' });
      for (const connection of gw.simulator.connections.slice(0, renewals.length))
        expect(
          connection.session.said.every(
            (s) => s.status === 'completed' && s.truncatedAtMs === undefined,
          ),
        ).toBe(true);
      // No loss, no apology: the caller never noticed.
      const types = gw.events.map((e) => e.event.type);
      expect(types).not.toContain('model_disconnected');
      expect(types).not.toContain('prompt');
      expect(types.filter((t) => t === 'model_ready')).toHaveLength(1);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'caller_hung_up' });
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
    },
  );
});
