/**
 * The opening every scenario shares: a sipp caller dials a tenant's number with its RTP on our own
 * socket and hears the greeting. The scenario goes on from there with its race.
 */
import type { SimulatorConnection } from '../../gateway/realtime/simulator/realtime-simulator.ts';
import { CallerRtp } from '../e2e/caller-rtp.ts';
import { runSipp, type SippResult } from '../e2e/sipp-runner.ts';
import type { Closable } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import type { InProcessGateway } from './in-process-gateway.ts';

export interface DialOptions {
  /** The number dialled (the tenant's). */
  readonly service: string;
  /** sipp's scenario: by default the caller hangs up after `holdMs`. */
  readonly scenario?: string;
  /** How long the caller stays on before hanging up (scenarios with a pause). */
  readonly holdMs?: number;
  readonly timeoutSeconds?: number;
  /** Takes the caller's RTP socket into the test's care (closeAfterEach). */
  readonly own?: <T extends Closable>(resource: T) => T;
  /** Wait until the greeting is heard (default true). */
  readonly hearGreeting?: boolean;
}

export interface DialledCall {
  readonly rtp: CallerRtp;
  /** sipp's run: resolves when the call is over. */
  readonly sipp: Promise<SippResult>;
}

/** Dials `sipPort` on loopback and, unless told otherwise, waits for the greeting. */
export async function dial(sipPort: number, options: DialOptions): Promise<DialledCall> {
  const rtp = await CallerRtp.open();
  options.own?.(rtp);
  const sipp = runSipp({
    scenario: options.scenario ?? 'uac-call-external-rtp.xml',
    port: sipPort,
    transport: 'udp',
    service: options.service,
    ...(options.holdMs !== undefined && { pauseMs: options.holdMs }),
    timeoutSeconds: options.timeoutSeconds ?? 40,
    extraArgs: ['-set', 'rtp_port', String(rtp.port)],
  });
  // Generous: on a loaded machine the first render of a line and the call's setup share the CPU.
  if (options.hearGreeting ?? true)
    await waitFor(
      async () => (rtp.audibleSince(0) >= 10 ? true : undefined),
      20_000,
      'the greeting',
    );
  return { rtp, sipp };
}

export interface PlacedCall extends DialledCall {
  /** The simulator's side of the call's model session. */
  readonly model: SimulatorConnection;
}

/** A call to the in-process gateway's test tenant, with the simulator's side of its model session. */
export async function placeCall(
  gw: InProcessGateway,
  options: Omit<DialOptions, 'service'> & { service?: string },
): Promise<PlacedCall> {
  const connection = gw.simulator.nextConnection(10_000);
  // Handled here, awaited below: a connection that never comes fails the call, not the process.
  connection.catch(() => undefined);
  const { rtp, sipp } = await dial(gw.sipPort, { service: '7000', ...options });
  return { rtp, sipp, model: await connection };
}
