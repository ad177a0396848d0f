/**
 * Race: the model's connection drops while callgate is still opening it (connected, the
 * session.update not yet answered). The loss is reported twice inside callgate: as the session's
 * `disconnected` event and as the failed configure. Only whoever opened the session acts on it:
 * at the call's start, while the caller still hears ringing, the call is refused with 503 and
 * Retry-After and never answered (no apology, no second session), and for a re-opened session the
 * caller hears the goodbye once before the BYE.
 */
import { describe, expect, it } from 'vitest';
import { registry } from '../../config/metrics.ts';
import { CallPrompts } from '../../gateway/call/call-prompts.ts';
import type { SimulatorConnection } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { quietLog } from '../support/action-harness.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.ts';
import { runSipp } from '../e2e/sipp-runner.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'model-lost-while-opening',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {},
  toolOutputs: {},
  systemMessage: 'Noted.',
};

/** How long the session.update goes unanswered before the connection drops. */
const CONFIGURE_STALL_MS = 300;

const own = closeAfterEach();

/** A counter's value in this process's registry (the in-process gateway's), summed over the labels not given; 0 when absent. */
async function counterValue(name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

/**
 * The next connection stops reading as soon as it is accepted (before the client's session.update,
 * which the client sends only once it has the session.created), and drops a moment later.
 */
function dropNextWhileConfiguring(gw: InProcessGateway): Promise<SimulatorConnection> {
  return gw.simulator.nextConnection(25_000).then(async (connection) => {
    connection.pauseReading();
    await new Promise((resolve) => setTimeout(resolve, CONFIGURE_STALL_MS));
    connection.terminate();
    return connection;
  });
}

function promptKinds(gw: InProcessGateway): string[] {
  return gw.events.flatMap((e) => (e.event.type === 'prompt' ? [e.event.kind] : []));
}

describe('when the model connection drops while callgate is still opening it', () => {
  it(
    'should refuse the call at its start with 503, never answered, without an apology or a second session',
    { timeout: 60_000 },
    async () => {
      const prompts = new CallPrompts({ log: quietLog });
      const gw = own(await startInProcessGateway({ script: SCRIPT, prompts }));
      const before = {
        reconnecting: await counterValue('callgate_call_apology_prompts_total', {
          kind: 'reconnecting',
        }),
        reopens: await counterValue('callgate_call_model_reopens_total', {}),
        rejected: await counterValue('callgate_calls_ended_total', {
          tenant: 'demo',
          reason: 'rejected',
        }),
        modelLost: await counterValue('callgate_calls_ended_total', {
          tenant: 'demo',
          reason: 'model_lost',
        }),
        refused: await counterValue('callgate_calls_refused_total', { reason: 'setup_failed' }),
      };
      const dropped = dropNextWhileConfiguring(gw);
      const sipp = runSipp({
        scenario: 'uac-admission.xml',
        port: gw.sipPort,
        transport: 'udp',
        service: '7000',
        timeoutSeconds: 30,
      });
      const [opened, ran] = await Promise.allSettled([dropped, sipp]);
      if (ran.status === 'rejected') throw ran.reason;
      const result = ran.value;
      if (opened.status === 'rejected') {
        throw new Error(`${String(opened.reason)}; sipp saw: ${result.firstLines.join(' | ')}`);
      }
      const connection = opened.value;
      expect(result.exitCode, result.stderr).toBe(0);
      // Ringing, then the refusal (with Retry-After, or sipp fails the call): no 200, no BYE.
      expect(
        result.firstLines.filter((line) => /^received SIP\/2\.0 [1-6]\d\d/.test(line)),
      ).toEqual([
        'received SIP/2.0 100 Trying',
        'received SIP/2.0 180 Ringing',
        'received SIP/2.0 503 Service Unavailable',
      ]);
      expect(result.firstLines.filter((line) => /BYE/.test(line))).toEqual([]);
      const rejected = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'rejected'),
        5_000,
        'the refusal of the call',
      );
      expect(rejected.event).toMatchObject({ status: 503 });
      // Give a stray re-open time to show itself.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(gw.simulator.connections).toEqual([connection]);
      expect(connection.session.said).toEqual([]);
      const types = gw.events.map((e) => e.event.type);
      expect(types).not.toContain('model_ready');
      expect(types).not.toContain('answered');
      expect(
        gw.events.filter((e) => e.event.type === 'model_disconnected').map((e) => e.event),
      ).toEqual([expect.objectContaining({ willReopen: false })]);
      // No apology for a re-open that is not going to happen: the caller hears nothing before the BYE.
      expect(promptKinds(gw)).toEqual([]);
      expect(
        await counterValue('callgate_call_apology_prompts_total', { kind: 'reconnecting' }),
      ).toBe(before.reconnecting);
      expect(await counterValue('callgate_call_model_reopens_total', {})).toBe(before.reopens);
      expect(
        await counterValue('callgate_calls_ended_total', { tenant: 'demo', reason: 'rejected' }),
      ).toBe(before.rejected + 1);
      expect(
        await counterValue('callgate_calls_ended_total', { tenant: 'demo', reason: 'model_lost' }),
      ).toBe(before.modelLost);
      expect(await counterValue('callgate_calls_refused_total', { reason: 'setup_failed' })).toBe(
        before.refused + 1,
      );
      // Nothing of the refused call is left open: no call held, no media port taken.
      expect(gw.calls.active.size).toBe(0);
      expect(gw.ports.inUse).toBe(0);
    },
  );

  it(
    'should say goodbye once when the re-opened session drops while it is configured',
    { timeout: 60_000 },
    async () => {
      const prompts = new CallPrompts({ log: quietLog });
      // Rendered ahead, as the gateway does for μ-law at start.
      await prompts.get('reconnecting', 'pcmu');
      const goodbye = await prompts.get('goodbye', 'pcmu');
      const gw = own(await startInProcessGateway({ script: SCRIPT, prompts }));
      const before = {
        goodbye: await counterValue('callgate_call_apology_prompts_total', {
          kind: 'goodbye',
          audio: 'speech',
        }),
        failedReopens: await counterValue('callgate_call_model_reopens_total', {
          cause: 'lost',
          outcome: 'failed',
        }),
      };
      const {
        rtp,
        sipp,
        model: firstConnection,
      } = await placeCall(gw, { scenario: 'uac-external-rtp-callee-bye.xml', own });
      const second = dropNextWhileConfiguring(gw);
      const lostAt = Date.now();
      firstConnection.terminate();
      await second;

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'model_lost' });
      // The apology for the first loss, then one goodbye: not a second one started over the first.
      expect(promptKinds(gw)).toEqual(['reconnecting', 'goodbye']);
      expect(gw.simulator.connections).toHaveLength(2);
      expect(
        await counterValue('callgate_call_apology_prompts_total', {
          kind: 'goodbye',
          audio: 'speech',
        }),
      ).toBe(before.goodbye + 1);
      expect(
        await counterValue('callgate_call_model_reopens_total', {
          cause: 'lost',
          outcome: 'failed',
        }),
      ).toBe(before.failedReopens + 1);
      // What the caller heard after the goodbye began: the goodbye once, then the BYE.
      const goodbyeAt =
        gw.events.find((e) => e.event.type === 'prompt' && e.event.kind === 'goodbye')?.at ?? NaN;
      expect(goodbyeAt).toBeGreaterThan(lostAt);
      const goodbyeFrames = goodbye.ms / 20;
      const heard = rtp.audibleSince(goodbyeAt, ended.at);
      expect(heard).toBeGreaterThan(goodbyeFrames * 0.8);
      expect(heard).toBeLessThanOrEqual(goodbyeFrames + 5);
    },
  );

  it(
    'should not play an apology that finished rendering after the goodbye began',
    { timeout: 60_000 },
    async () => {
      const rendered = new CallPrompts({ log: quietLog });
      const goodbye = await rendered.get('goodbye', 'pcmu');
      // The apology is rendered on first use (a format the gateway does not render ahead), slowly:
      // it is ready halfway through the goodbye, which began once the re-open failed.
      const prompts: Pick<CallPrompts, 'get'> = {
        get: async (kind, format) => {
          if (kind === 'reconnecting')
            await new Promise((resolve) =>
              setTimeout(resolve, CONFIGURE_STALL_MS + 200 + goodbye.ms / 2),
            );
          return rendered.get(kind, format);
        },
      };
      const gw = own(await startInProcessGateway({ script: SCRIPT, prompts }));
      const {
        rtp,
        sipp,
        model: firstConnection,
      } = await placeCall(gw, { scenario: 'uac-external-rtp-callee-bye.xml', own });
      const second = dropNextWhileConfiguring(gw);
      const lostAt = Date.now();
      firstConnection.terminate();
      await second;

      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'model_lost' });
      // Give the late apology time to show itself.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(promptKinds(gw)).toEqual(['goodbye']);
      // Nothing but the goodbye was heard after the loss.
      expect(rtp.audibleSince(lostAt)).toBeLessThanOrEqual(goodbye.ms / 20 + 5);
    },
  );
});
