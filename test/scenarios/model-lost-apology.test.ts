/**
 * Race: the model's connection drops mid-call while a booking runs. The caller is not left on a
 * silent line: callgate plays its pre-rendered apology at once, re-opens the model with the call's
 * summary while it plays, and the booking's result is told on the new session. When the new session
 * is lost too, the caller hears the goodbye prompt before the BYE and the result goes out of band.
 */
import { describe, expect, it } from 'vitest';
import { registry } from '../../config/metrics.ts';
import { CallPrompts } from '../../gateway/call/call-prompts.ts';
import { quietLog } from '../support/action-harness.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';
import { messagesOnceSettled, sandboxMessages } from '../support/sandbox-messages.ts';

const SCRIPT = {
  name: 'model-lost-apology',
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
            date: '2031-10-14',
            time: '19:00',
            party_size: 2,
            name: 'Edsger Dijkstra',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Noted.',
};

/** The booking stays RUNNING this long, so the drop falls inside it (below the harness provider timeout, 1 s). */
const BOOKING_LATENCY_MS = 800;

const own = closeAfterEach();

/** A counter's value in this process's registry (the in-process gateway's), summed over the labels not given; 0 when absent. */
async function counterValue(name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

function eventAt(gw: InProcessGateway, type: string, nth = 0): number {
  return gw.events.filter((e) => e.event.type === type)[nth]?.at ?? NaN;
}

describe('when the model connection drops mid-call', () => {
  it(
    'should play the apology at once, re-open with the summary while it plays, and tell the result on the new session',
    { timeout: 90_000 },
    async () => {
      const prompts = new CallPrompts({ log: quietLog });
      const apology = await prompts.get('reconnecting', 'pcmu');
      expect(apology.rendered).toBe('speech');
      const gw = own(await startInProcessGateway({ script: SCRIPT, prompts }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      // The caller stays on until callgate hangs up, once the result's words have been heard: the
      // apology, the re-open and the result all happen in real time, slower on a loaded machine.
      const {
        rtp,
        sipp,
        model: firstConnection,
      } = await placeCall(gw, { scenario: 'uac-external-rtp-callee-bye.xml', own });
      await new Promise((resolve) => setTimeout(resolve, 500));
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking to be owned by the call',
      );

      const second = gw.simulator.nextConnection(10_000);
      const droppedAt = Date.now();
      firstConnection.terminate();
      const secondConnection = await second;

      // The apology is what the caller hears first: callgate's own line, queued before the new session spoke.
      const prompt = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'prompt'),
        2_000,
        'the apology prompt',
      );
      expect(prompt.event).toEqual({
        type: 'prompt',
        kind: 'reconnecting',
        audio: 'speech',
        ms: apology.ms,
      });
      expect(prompt.at - droppedAt).toBeLessThan(500);
      expect(eventAt(gw, 'model_disconnected')).toBeLessThanOrEqual(prompt.at);
      await waitFor(
        async () =>
          gw.events.some((e) => e.event.type === 'model_ready' && e.event.attempt === 2)
            ? true
            : undefined,
        5_000,
        'the re-opened session',
      );
      expect(prompt.at).toBeLessThanOrEqual(eventAt(gw, 'model_ready', 1));
      // The new session knows the call: its agent and the booking still running.
      const instructions = String(secondConnection.session.configuration.instructions);
      expect(instructions).toContain('The active agent is reservations');
      expect(instructions).toContain(operationId);

      const op = await gw.delivered(operationId, 20_000);
      expect(op.state).toBe('COMMITTED');
      expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
      expect(
        secondConnection.session.heard.some(
          (r) => r.kind === 'system_message' && r.text.includes(operationId),
        ),
      ).toBe(true);

      // Frames the caller should have heard since the drop: the apology and what the new session said.
      const heardSinceDrop = (): number => {
        const said = secondConnection.session.said
          .filter((s) => s.status === 'completed')
          .reduce((ms, s) => ms + s.totalAudioMs, 0);
        return ((apology.ms + said) / 20) * 0.8;
      };
      await waitFor(
        async () => (rtp.audibleSince(droppedAt) > heardSinceDrop() ? true : undefined),
        15_000,
        'the apology and the new session to be heard',
      );
      await call.hangup();
      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      // What the caller heard after the drop: the whole apology, with no gap at its start, then the new session.
      const apologyFrames = apology.ms / 20;
      // At once: more than half of the first second after the drop is the apology (a loaded test
      // machine may start it a few hundred milliseconds late; waiting for the re-open would take longer).
      expect(rtp.audibleSince(droppedAt, droppedAt + 1_000)).toBeGreaterThan(25);
      expect(rtp.audibleSince(droppedAt, droppedAt + apology.ms)).toBeGreaterThan(
        apologyFrames * 0.8,
      );
      expect(rtp.audibleSince(droppedAt)).toBeGreaterThan(heardSinceDrop());
      const effects = (await (
        await fetch(`${gw.sandboxUrl}/admin/effects?service=bookings`)
      ).json()) as { effects: { reference?: string }[] };
      expect(effects.effects.map((e) => e.reference)).toEqual([operationId]);
      expect(gw.events.filter((e) => e.event.type === 'prompt')).toHaveLength(1);
    },
  );

  it(
    'should say goodbye before the BYE when the re-opened session is lost too, and send the result out of band once',
    { timeout: 90_000 },
    async () => {
      const prompts = new CallPrompts({ log: quietLog });
      const goodbye = await prompts.get('goodbye', 'pcmu');
      const before = {
        reconnecting: await counterValue('callgate_call_apology_prompts_total', {
          kind: 'reconnecting',
          audio: 'speech',
        }),
        goodbye: await counterValue('callgate_call_apology_prompts_total', {
          kind: 'goodbye',
          audio: 'speech',
        }),
        reopened: await counterValue('callgate_call_model_reopens_total', {
          cause: 'lost',
          outcome: 'ok',
        }),
        ended: await counterValue('callgate_calls_ended_total', {
          tenant: 'demo',
          reason: 'model_lost',
        }),
      };
      const gw = own(await startInProcessGateway({ script: SCRIPT, prompts }));
      await gw.addFault({
        fault: `latency=${BOOKING_LATENCY_MS}`,
        service: 'bookings',
        operation: 'book',
      });
      const {
        rtp,
        sipp,
        model: firstConnection,
      } = await placeCall(gw, { scenario: 'uac-external-rtp-callee-bye.xml', own });
      await new Promise((resolve) => setTimeout(resolve, 500));
      rtp.press('1');
      const call = await waitFor(async () => gw.sessions[0], 1_000, 'the call session');
      const operationId = await waitFor(
        async () => [...call.agent.operations.keys()][0],
        8_000,
        'the booking to be owned by the call',
      );

      const second = gw.simulator.nextConnection(10_000);
      firstConnection.terminate();
      const secondConnection = await second;
      await waitFor(
        async () =>
          gw.events.some((e) => e.event.type === 'model_ready' && e.event.attempt === 2)
            ? true
            : undefined,
        5_000,
        'the re-opened session',
      );
      // Let the apology finish, so what follows the second drop is the goodbye alone.
      const apology = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'prompt'),
        2_000,
        'the apology prompt',
      );
      const apologyMs = apology.event.type === 'prompt' ? apology.event.ms : 0;
      await new Promise((resolve) => setTimeout(resolve, apology.at + apologyMs - Date.now()));
      const lostAt = Date.now();
      secondConnection.terminate();

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.firstLines.filter((line) => /BYE/.test(line))).toEqual([
        expect.stringMatching(/^received BYE /),
      ]);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'model_lost' });
      expect(
        gw.events
          .filter((e) => e.event.type === 'prompt')
          .map((e) => e.event.type === 'prompt' && e.event.kind),
      ).toEqual(['reconnecting', 'goodbye']);
      // The BYE waited for the goodbye: the caller heard it whole before the call ended.
      expect(ended.at - lostAt).toBeGreaterThanOrEqual(goodbye.ms * 0.9);
      expect(rtp.audibleSince(lostAt, ended.at)).toBeGreaterThan((goodbye.ms / 20) * 0.8);
      expect(gw.simulator.connections.length).toBeLessThanOrEqual(2);
      // Counted as an operator sees it: one apology of each kind, one successful re-open, one call lost to the model.
      expect(
        await counterValue('callgate_call_apology_prompts_total', {
          kind: 'reconnecting',
          audio: 'speech',
        }),
      ).toBe(before.reconnecting + 1);
      expect(
        await counterValue('callgate_call_apology_prompts_total', {
          kind: 'goodbye',
          audio: 'speech',
        }),
      ).toBe(before.goodbye + 1);
      expect(
        await counterValue('callgate_call_model_reopens_total', { cause: 'lost', outcome: 'ok' }),
      ).toBe(before.reopened + 1);
      expect(
        await counterValue('callgate_calls_ended_total', { tenant: 'demo', reason: 'model_lost' }),
      ).toBe(before.ended + 1);

      const op = await gw.delivered(operationId);
      expect(op.state).toBe('COMMITTED');
      if (op.delivery?.channel === 'out_of_band') {
        expect(await messagesOnceSettled(gw.sandboxUrl, operationId)).toHaveLength(1);
      } else {
        // Committed and told on the re-opened session before it was lost: nothing goes out of band.
        expect(op.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
        expect(await sandboxMessages(gw.sandboxUrl, operationId)).toEqual([]);
      }
    },
  );
});
