/**
 * What the gateway-crash scenarios share: a worker process (workers, the sandbox, out-of-band
 * sending) and gateway A on one configuration and Redis prefix; a caller on gateway A who presses 1
 * for a booking the provider holds for a while; the SIGKILL of gateway A; its replacement; and
 * what must hold afterwards: the replacement's janitor delivered the result out of band once, and
 * the system of record has the one booking.
 */
import { afterEach, expect } from 'vitest';
import { CallerRtp } from '../e2e/caller-rtp.ts';
import {
  startCallgate,
  writeCallgateConfig,
  type CallgateProcess,
  type CallView,
  type OperationView,
  type SharedSetup,
} from '../e2e/callgate-process.ts';
import type { SippResult } from '../e2e/sipp-runner.ts';
import type { Closable } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { dial } from './place-call.ts';
import { messagesOnceSettled } from '../support/sandbox-messages.ts';

export interface CrashCallOptions {
  /** How long the sandbox holds the booking (below the provider timeout, 5 s). */
  readonly bookingLatencyMs: number;
  /** The caller's stay on the line, and sipp's limit (its BYE goes unanswered once A is dead). */
  readonly holdMs: number;
  readonly timeoutSeconds: number;
}

export interface CallOnGatewayA {
  readonly shared: SharedSetup;
  readonly worker: CallgateProcess;
  readonly gatewayA: CallgateProcess;
  readonly call: CallView;
  readonly rtp: CallerRtp;
  /** sipp's run of the call that dies with gateway A. */
  readonly lostCall: Promise<SippResult>;
}

/** Registers the clean-up (callers closed, processes stopped, the shared prefix deleted last) and returns the steps. */
export function gatewayCrashScenario(script: Record<string, unknown>) {
  const started: CallgateProcess[] = [];
  const callers: CallerRtp[] = [];
  afterEach(async () => {
    for (const caller of callers.splice(0)) caller.close();
    const processes = started.splice(0).reverse();
    // Every process keeps the shared data but the last one stopped, which deletes it.
    for (const [i, p] of processes.entries()) await p.stop(i < processes.length - 1);
  });

  return {
    /** Starts the worker and gateway A, calls A and presses 1: the booking is on its way. */
    async callAndBook(options: CrashCallOptions): Promise<CallOnGatewayA> {
      const shared = writeCallgateConfig({ script, agent: 'reservations' });
      const worker = await startCallgate({ script, shared, worker: true });
      started.push(worker);
      const gatewayA = await startCallgate({ script, shared, role: 'gateway', gatewayId: 'gw-a' });
      started.push(gatewayA);
      await worker.addFault({
        fault: `latency=${options.bookingLatencyMs}`,
        service: 'bookings',
        operation: 'book',
      });

      const own = <T extends Closable>(resource: T): T => {
        if (resource instanceof CallerRtp) callers.push(resource);
        return resource;
      };
      const { rtp, sipp: lostCall } = await dial(gatewayA.sipPort, {
        service: '1000',
        holdMs: options.holdMs,
        timeoutSeconds: options.timeoutSeconds,
        own,
      });
      const call = await gatewayA.activeCall();
      await new Promise((resolve) => setTimeout(resolve, 800));
      rtp.press('1');
      return { shared, worker, gatewayA, call, rtp, lostCall };
    },

    /** SIGKILL; the caller's phone stops sending too, or its stray RTP would reach the next call on that port. */
    async kill(setting: CallOnGatewayA): Promise<void> {
      setting.gatewayA.proc.child.kill('SIGKILL');
      await setting.gatewayA.proc.exited;
      setting.rtp.close();
      callers.splice(callers.indexOf(setting.rtp), 1);
    },

    async startReplacement(shared: SharedSetup): Promise<CallgateProcess> {
      const gatewayB = await startCallgate({ script, shared, role: 'gateway', gatewayId: 'gw-b' });
      started.push(gatewayB);
      return gatewayB;
    },

    /** A caller's RTP socket closed after the test. */
    async openCaller(): Promise<CallerRtp> {
      const caller = await CallerRtp.open();
      callers.push(caller);
      return caller;
    },
  };
}

/**
 * The booking's result was delivered by the janitor, out of band, because gateway A is gone: one
 * message sent once, and one booking at the system of record. Returns the operation as delivered.
 */
export async function expectDeliveredOutOfBandOnce(
  worker: CallgateProcess,
  sessionId: string,
  operationId: string,
): Promise<OperationView> {
  const delivered = await waitFor(
    async () => {
      const op = (await worker.operations(sessionId)).find((o) => o.operation_id === operationId);
      return op?.out_of_band?.sms?.state === 'delivered' ? op : undefined;
    },
    20_000,
    'the result to be delivered by the janitor',
  );
  expect(delivered).toMatchObject<Partial<OperationView>>({ state: 'COMMITTED' });
  expect(delivered.delivery).toMatchObject({
    decision: 'deliver_out_of_band',
    channel: 'out_of_band',
    delivered: false,
    queued: true,
  });
  expect(delivered.delivery?.reasons).toContain('gateway_gone');

  expect(
    (await messagesOnceSettled(worker.sandboxUrl, operationId)).map((m) => m.deliveries),
  ).toEqual([1]);
  const effects = (
    await worker.get<{ effects: { reference?: string }[] }>(
      `${worker.sandboxUrl}/admin/effects?service=bookings`,
    )
  ).effects;
  expect(effects.map((e) => e.reference)).toEqual([operationId]);
  return delivered;
}
