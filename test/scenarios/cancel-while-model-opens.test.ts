/**
 * Race: the caller gives up (CANCEL) while callgate, having sent 180, is still opening the model
 * session (connected, its session.update not answered). The call is never answered: the CANCEL
 * gets 200 and the INVITE 487, the model session is closed, the media ports go back, and nothing
 * counts the call as active.
 */
import { describe, expect, it } from 'vitest';
import { registry } from '../../config/metrics.ts';
import { quietLog } from '../support/action-harness.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { CallPrompts } from '../../gateway/call/call-prompts.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { runSipp } from '../e2e/sipp-runner.ts';

const SCRIPT = {
  name: 'cancel-while-model-opens',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {},
  toolOutputs: {},
  systemMessage: 'Noted.',
};

const own = closeAfterEach();

async function gaugeValue(name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}

describe('when the caller cancels while the model session is being opened', () => {
  it(
    'should answer nothing and leave no model session, media port or active call behind',
    { timeout: 60_000 },
    async () => {
      const gw = own(
        await startInProcessGateway({
          script: SCRIPT,
          prompts: new CallPrompts({ log: quietLog }),
        }),
      );
      const activeBefore = await gaugeValue('callgate_calls_active', { tenant: 'demo' });
      // The model connects, then never answers the session.update: the call keeps ringing.
      const opening = gw.simulator.nextConnection(10_000).then((connection) => {
        connection.pauseReading();
        const closed = new Promise<void>((resolve) => {
          const session = connection.session;
          const onClosed = session.onTransportClosed.bind(session);
          session.onTransportClosed = () => {
            onClosed();
            resolve();
          };
        });
        return { connection, closed };
      });
      const sipp = runSipp({
        scenario: 'uac-cancel-after-ringing.xml',
        port: gw.sipPort,
        transport: 'udp',
        service: '7000',
        // Long enough for the model to connect and be stuck in its configuration.
        pauseMs: 1_500,
        timeoutSeconds: 30,
      });
      const { connection, closed } = await opening;

      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.firstLines.filter((line) => /^received SIP\/2\.0/.test(line))).toEqual([
        'received SIP/2.0 100 Trying',
        'received SIP/2.0 180 Ringing',
        'received SIP/2.0 200 OK',
        'received SIP/2.0 487 Request Terminated',
      ]);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'caller_hung_up', dialogReason: 'cancelled' });
      // The model session callgate was opening is closed (the simulator sees its transport close).
      connection.resumeReading();
      await closed;
      const types = gw.events.map((e) => e.event.type);
      expect(types).not.toContain('answered');
      expect(types).not.toContain('model_ready');
      expect(connection.session.said).toEqual([]);
      expect(gw.calls.active.size).toBe(0);
      expect(gw.ports.inUse).toBe(0);
      expect(await gaugeValue('callgate_calls_active', { tenant: 'demo' })).toBe(activeBefore);
      expect(gw.simulator.connections.filter((c) => c !== connection)).toEqual([]);
    },
  );
});
