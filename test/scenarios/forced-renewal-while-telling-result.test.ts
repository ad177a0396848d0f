/**
 * Race: the model session is about to reach its limit and no quiet moment comes: the agent is
 * telling a committed booking when callgate has to switch sessions anyway. The old session is cut
 * mid-sentence. What the caller did not hear whole does not count as told: the delivery resolves
 * at the switch (not after its 45 s bound), and the result is said again, whole, on the new session.
 */
import { describe, expect, it } from 'vitest';
import { SpeechSynthesizer } from '../../gateway/realtime/simulator/speech-synthesizer.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'forced-renewal-while-telling-result',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': { say: 'Booking it.', tools: [{ name: 'book_table', arguments: { restaurant: 'bistro-nord', date: '2031-07-09', time: '18:30', party_size: 4, name: 'Ken Thompson' } }] },
  },
  // The agent talks through the expiry warning, and the result follows at once: no quiet moment.
  toolOutputs: { book_table: 'One moment please, I am asking the restaurant now.' },
  systemMessage: 'Your table for four is confirmed for half past six tonight, and the restaurant has your name on the list at the door.',
};

/**
 * The provider's limit and the warning before it: the warning comes 4 s into each session (while
 * the agent says "One moment..."), and a renewal with no quiet moment is forced at half the
 * warning, 10 s into the session, while the result is being told.
 */
const SESSION_LIMIT_MS = 16_000;
const EXPIRY_WARNING_MS = 12_000;
const FORCED_AFTER_CONNECT_MS = SESSION_LIMIT_MS - EXPIRY_WARNING_MS / 2;
/** The booking commits while the agent is still saying "One moment...". */
const BOOKING_LATENCY_MS = 500;

const own = closeAfterEach();

describe('when the model session must be renewed while a result is being told', () => {
  it('should cut the old session, settle the delivery as not told at once, and tell the result again on the new session', { timeout: 90_000, retry: 1 }, async () => {
    // The lines are long enough for the timing above: the result spans the forced switch on the
    // first session, and is over well before the second session would be forced in turn.
    const speech = new SpeechSynthesizer();
    const resultMs = (await speech.render(SCRIPT.systemMessage, 'pcmu')).length / 8;
    expect(resultMs).toBeGreaterThan(4_000);
    expect(resultMs).toBeLessThan(FORCED_AFTER_CONNECT_MS - 2_000);

    const gw = own(await startInProcessGateway({ script: SCRIPT, session: { sessionLimitMs: SESSION_LIMIT_MS, expiryWarningMs: EXPIRY_WARNING_MS }, maxSessionMs: SESSION_LIMIT_MS, speechSpeed: 1 }));
    await gw.addFault({ fault: `latency=${BOOKING_LATENCY_MS}`, service: 'bookings', operation: 'book' });
    const { rtp, sipp, model: firstConnection } = await placeCall(gw, { holdMs: 24_000, timeoutSeconds: 60, own });
    rtp.press('1');
    const call = await waitFor(async () => gw.sessions[0], 2_000, 'the call session');
    const operationId = await waitFor(async () => [...call.agent.operations.keys()][0], 8_000, 'the booking to be owned by the call');
    const second = gw.simulator.nextConnection(15_000);
    const expiring = await waitFor(async () => gw.events.find((e) => e.event.type === 'model_expiring'), 8_000, 'the expiry warning');
    const renewed = await waitFor(async () => gw.events.find((e) => e.event.type === 'model_renewed'), 15_000, 'the forced renewal');
    const secondConnection = await second;

    // Forced: no quiet moment came, and the first session was telling the result at the switch.
    expect(renewed.at - expiring.at).toBeGreaterThan(EXPIRY_WARNING_MS / 2 - 1_000);
    const cut = firstConnection.session.said.find((s) => s.text === SCRIPT.systemMessage);
    expect(cut).toBeDefined();
    expect(cut?.audioMsSent).toBeGreaterThan(0);
    expect(cut?.audioMsSent).toBeLessThan(cut?.totalAudioMs ?? 0);

    // The delivery settles at the switch, as not told: nothing of the cut sentence counts.
    const cutOutcome = await waitFor(async () => gw.events.find((e) => e.event.type === 'result_spoken' && e.event.operationId === operationId), 2_000, 'the cut delivery to settle');
    expect(cutOutcome.event).toMatchObject({ status: 'failed' });
    expect(cutOutcome.at - renewed.at).toBeLessThan(500);
    const ledger = gw.agents.h.layer.ledger;
    expect((await ledger.get('demo', operationId))?.delivery?.delivered).not.toBe(true);
    // The old session's sentence stops at the switch; the new session says the result from the start.
    expect(rtp.audibleSince(renewed.at + 300, renewed.at + 900)).toBe(0);

    const op = await gw.delivered(operationId, 20_000);
    expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice', delivered: true });
    const outcomes = gw.events.flatMap((e) => (e.event.type === 'result_spoken' && e.event.operationId === operationId ? [e.event.status] : []));
    expect(outcomes).toEqual(['failed', 'completed']);
    const toldOn = (connection: typeof firstConnection) => connection.session.heard.filter((r) => r.kind === 'system_message' && r.text.includes(operationId)).length;
    expect(toldOn(firstConnection)).toBe(1);
    expect(toldOn(secondConnection)).toBe(1);
    const retold = secondConnection.session.said.find((s) => s.text === SCRIPT.systemMessage);
    expect(retold).toMatchObject({ status: 'completed' });
    expect(retold?.truncatedAtMs).toBeUndefined();
    const audit = (await gw.agents.audit.read(call.sessionId)).map((r) => r.event.type);
    expect(audit.indexOf('delivery_interrupted')).toBeGreaterThanOrEqual(0);
    expect(audit.indexOf('delivery_interrupted')).toBeLessThan(audit.lastIndexOf('delivered'));

    const result = await sipp;
    rtp.mute();
    expect(result.exitCode, result.stderr).toBe(0);
    // The caller heard the result again, whole (80 % of its frames, for pacing on a loaded machine).
    expect(rtp.audibleSince(renewed.at + 900)).toBeGreaterThan((resultMs / 20) * 0.8);
    // A renewal, not a loss: no apology, no re-open.
    const types = gw.events.map((e) => e.event.type);
    expect(types).not.toContain('model_disconnected');
    expect(types).not.toContain('prompt');
    const effects = (await (await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)).json()) as { effects: { reference?: string }[] };
    expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
  });
});
