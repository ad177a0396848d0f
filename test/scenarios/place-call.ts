/**
 * The opening every in-process scenario shares: a sipp caller dials the test tenant's number with
 * its RTP on our own socket, the simulator's connection for the call is taken, and the greeting is
 * heard. The scenario goes on from there with its race.
 */
import type { SimulatorConnection } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { CallerRtp } from '../e2e/caller-rtp.ts';
import { runSipp, type SippResult } from '../e2e/sipp-runner.ts';
import { waitFor } from '../support/processes.ts';
import type { InProcessGateway } from './in-process-gateway.ts';

export interface PlacedCall {
  readonly rtp: CallerRtp;
  /** sipp's run: resolves when the caller hangs up after `holdMs`. */
  readonly sipp: Promise<SippResult>;
  /** The simulator's side of the call's model session. */
  readonly model: SimulatorConnection;
}

export async function placeCall(gw: InProcessGateway, options: { holdMs: number; timeoutSeconds?: number }): Promise<PlacedCall> {
  const rtp = await CallerRtp.open();
  const connection = gw.simulator.nextConnection(10_000);
  const sipp = runSipp({
    scenario: 'uac-call-external-rtp.xml',
    port: gw.sipPort,
    transport: 'udp',
    service: '7000',
    pauseMs: options.holdMs,
    timeoutSeconds: options.timeoutSeconds ?? 40,
    extraArgs: ['-set', 'rtp_port', String(rtp.port)],
  });
  const model = await connection;
  await waitFor(async () => (rtp.audibleSince(0) >= 10 ? true : undefined), 10_000, 'the greeting');
  return { rtp, sipp, model };
}
