/**
 * Race: the gateway process holding a call is killed (SIGKILL) while the caller's booking runs in
 * a worker process. The call is gone with it, but the booking commits once, and a janitor in the
 * replacement gateway finds the dead gateway's result stream and delivers the result out of band
 * exactly once; the replacement takes new calls at once.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import type { CallView } from '../e2e/callgate-process.ts';
import { runSipp } from '../e2e/sipp-runner.ts';
import { expectDeliveredOutOfBandOnce, gatewayCrashScenario } from './gateway-crash.ts';

const SCRIPT = {
  name: 'gateway-crash-while-running',
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
            date: '2032-01-15',
            time: '19:30',
            party_size: 4,
            name: 'John Backus',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking is held at the provider past the crash (below the provider timeout, 5 s). */
const BOOKING_LATENCY_MS = 4_000;

const scenario = gatewayCrashScenario(SCRIPT);

describe('when the gateway holding a call dies while the booking runs', () => {
  it(
    'should commit the booking once and deliver its result out of band once through the replacement gateway',
    { timeout: 120_000 },
    async () => {
      // The caller's leg dies with the gateway: sipp's BYE goes unanswered and sipp gives up.
      const setting = await scenario.callAndBook({
        bookingLatencyMs: BOOKING_LATENCY_MS,
        holdMs: 6_000,
        timeoutSeconds: 10,
      });
      const { worker, call } = setting;
      const booking = await waitFor(
        async () =>
          (await worker.operations(call.session_id)).find(
            (op) => op.action === 'book_table' && op.state === 'RUNNING',
          ),
        8_000,
        'the booking to run',
      );
      await scenario.kill(setting);
      const gatewayB = await scenario.startReplacement(setting.shared);

      // The replacement answers a new call at once, while the dead gateway's result is still pending.
      const fresh = await scenario.openCaller();
      const newCall = await runSipp({
        scenario: 'uac-call-external-rtp.xml',
        port: gatewayB.sipPort,
        transport: 'udp',
        service: '1000',
        pauseMs: 5_000,
        timeoutSeconds: 15,
        extraArgs: ['-set', 'rtp_port', String(fresh.port)],
      });
      expect(newCall.exitCode, newCall.stderr).toBe(0);
      fresh.mute();
      expect(fresh.audibleSince(0)).toBeGreaterThan(10);

      await expectDeliveredOutOfBandOnce(worker, call.session_id, booking.operation_id);

      // The operator sees the dead gateway's call as lost, not as active.
      const calls = await gatewayB.get<{ active: (CallView & { owner_gateway: string })[] }>(
        '/v1/calls',
      );
      expect(calls.active.find((c) => c.session_id === call.session_id)).toMatchObject({
        state: 'lost',
        owner_gateway: 'gw-a',
      });
      expect((await setting.lostCall).exitCode).not.toBe(0);
    },
  );
});
