/**
 * Race: the gateway process holding a call is killed (SIGKILL) while the caller's booking runs in
 * a worker process. The call is gone with it, but the booking commits once, and a janitor in the
 * replacement gateway finds the dead gateway's result stream and delivers the result out of band
 * exactly once; the replacement takes new calls at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { CallerRtp } from '../e2e/caller-rtp.ts';
import { startCallgate, writeCallgateConfig, type CallgateProcess, type CallView, type OperationView } from '../e2e/callgate-process.ts';
import { runSipp } from '../e2e/sipp-runner.ts';

const SCRIPT = {
  name: 'gateway-crash-while-running',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: { '1': { say: 'Booking it.', tools: [{ name: 'book_table', arguments: { restaurant: 'bistro-nord', date: '2032-01-15', time: '19:30', party_size: 4, name: 'John Backus' } }] } },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** The booking is held at the provider past the crash (below the provider timeout, 5 s). */
const BOOKING_LATENCY_MS = 4_000;

const started: CallgateProcess[] = [];
const callers: CallerRtp[] = [];
afterEach(async () => {
  for (const c of callers.splice(0)) c.close();
  const processes = started.splice(0).reverse();
  for (const [i, p] of processes.entries()) await p.stop(i < processes.length - 1);
});

describe('when the gateway holding a call dies while the booking runs', () => {
  it('should commit the booking once and deliver its result out of band once through the replacement gateway', { timeout: 120_000 }, async () => {
    const shared = writeCallgateConfig({ script: SCRIPT, agent: 'reservations' });
    const worker = await startCallgate({ script: SCRIPT, shared, worker: true });
    started.push(worker);
    const gatewayA = await startCallgate({ script: SCRIPT, shared, role: 'gateway', gatewayId: 'gw-a' });
    started.push(gatewayA);
    await worker.addFault({ fault: `latency=${BOOKING_LATENCY_MS}`, service: 'bookings', operation: 'book' });

    const rtp = await CallerRtp.open();
    callers.push(rtp);
    // The caller's leg dies with the gateway: sipp's BYE goes unanswered and sipp gives up.
    const lostCall = runSipp({ scenario: 'uac-call-external-rtp.xml', port: gatewayA.sipPort, transport: 'udp', service: '1000', pauseMs: 6_000, timeoutSeconds: 10, extraArgs: ['-set', 'rtp_port', String(rtp.port)] });
    await waitFor(async () => (rtp.audibleSince(0) >= 10 ? true : undefined), 10_000, 'the greeting');
    const call = await gatewayA.activeCall();
    await new Promise((resolve) => setTimeout(resolve, 800));
    rtp.press('1');
    const booking = await waitFor(async () => (await worker.operations(call.session_id)).find((op) => op.action === 'book_table' && op.state === 'RUNNING'), 8_000, 'the booking to run');
    gatewayA.proc.child.kill('SIGKILL');
    await gatewayA.proc.exited;
    // The caller's phone stops sending too: its stray RTP would otherwise reach the next call on that port.
    rtp.close();
    callers.splice(callers.indexOf(rtp), 1);

    const gatewayB = await startCallgate({ script: SCRIPT, shared, role: 'gateway', gatewayId: 'gw-b' });
    started.push(gatewayB);

    // The replacement answers a new call at once, while the dead gateway's result is still pending.
    const fresh = await CallerRtp.open();
    callers.push(fresh);
    const newCall = await runSipp({ scenario: 'uac-call-external-rtp.xml', port: gatewayB.sipPort, transport: 'udp', service: '1000', pauseMs: 5_000, timeoutSeconds: 15, extraArgs: ['-set', 'rtp_port', String(fresh.port)] });
    expect(newCall.exitCode, newCall.stderr).toBe(0);
    fresh.mute();
    expect(fresh.audibleSince(0)).toBeGreaterThan(10);

    const delivered = await waitFor(async () => {
      const op = (await worker.operations(call.session_id)).find((o) => o.operation_id === booking.operation_id);
      return op?.delivery?.delivered === true ? op : undefined;
    }, 20_000, 'the result to be delivered by the janitor');
    expect(delivered).toMatchObject<Partial<OperationView>>({ state: 'COMMITTED' });
    expect(delivered.delivery).toMatchObject({ decision: 'deliver_out_of_band', channel: 'out_of_band' });
    expect(delivered.delivery?.reasons).toContain('gateway_gone');

    const messagesOf = async () => (await worker.get<{ messages: { deliveries: number }[] }>(`${worker.sandboxUrl}/admin/messages?operation_id=${booking.operation_id}`)).messages;
    await waitFor(async () => ((await messagesOf()).length > 0 ? true : undefined), 10_000, 'the out-of-band message');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect((await messagesOf()).map((m) => m.deliveries)).toEqual([1]);
    const effects = (await worker.get<{ effects: { reference?: string }[] }>(`${worker.sandboxUrl}/admin/effects?service=bookings`)).effects;
    expect(effects.map((e) => e.reference)).toEqual([booking.operation_id]);

    // The operator sees the dead gateway's call as lost, not as active.
    const calls = await gatewayB.get<{ active: (CallView & { owner_gateway: string })[] }>('/v1/calls');
    expect(calls.active.find((c) => c.session_id === call.session_id)).toMatchObject({ state: 'lost', owner_gateway: 'gw-a' });
    expect((await lostCall).exitCode).not.toBe(0);
  });
});
