/**
 * Race: the booking has COMMITTED and the gate has decided to tell the caller when the agent stops
 * talking, but the gateway process holding the call is killed (SIGKILL) before the acknowledgement
 * is spoken. The caller never heard it, so it is not counted as told: the result event stays
 * unacknowledged in the dead gateway's stream, and the replacement's janitor delivers it out of
 * band, exactly once. One booking at the system of record.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { CallerRtp } from '../e2e/caller-rtp.ts';
import { startCallgate, writeCallgateConfig, type CallgateProcess, type OperationView } from '../e2e/callgate-process.ts';
import { runSipp } from '../e2e/sipp-runner.ts';

const SCRIPT = {
  name: 'gateway-crash-after-commit',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: { '1': { say: 'Booking it.', tools: [{ name: 'book_table', arguments: { restaurant: 'bistro-nord', date: '2032-02-09', time: '20:00', party_size: 2, name: 'Frances Allen' } }] } },
  // A long answer to the tool: the agent is still talking when the booking commits.
  toolOutputs: {
    book_table: 'One moment please. While the restaurant confirms your table, let me tell you about tonight: grilled sea bass, a risotto with wild mushrooms, and a lemon tart to finish.',
  },
  systemMessage: 'Your table is confirmed.',
};

/** Commits while the tool's long answer is still being spoken (below the provider timeout, 5 s). */
const BOOKING_LATENCY_MS = 1_000;

const started: CallgateProcess[] = [];
const callers: CallerRtp[] = [];
afterEach(async () => {
  for (const c of callers.splice(0)) c.close();
  const processes = started.splice(0).reverse();
  for (const [i, p] of processes.entries()) await p.stop(i < processes.length - 1);
});

describe('when the gateway dies after the commit but before the acknowledgement is spoken', () => {
  it('should not count the result as told, and deliver it out of band once through the replacement gateway', { timeout: 120_000 }, async () => {
    const shared = writeCallgateConfig({ script: SCRIPT, agent: 'reservations' });
    const worker = await startCallgate({ script: SCRIPT, shared, worker: true });
    started.push(worker);
    const gatewayA = await startCallgate({ script: SCRIPT, shared, role: 'gateway', gatewayId: 'gw-a' });
    started.push(gatewayA);
    await worker.addFault({ fault: `latency=${BOOKING_LATENCY_MS}`, service: 'bookings', operation: 'book' });

    const rtp = await CallerRtp.open();
    callers.push(rtp);
    const lostCall = runSipp({ scenario: 'uac-call-external-rtp.xml', port: gatewayA.sipPort, transport: 'udp', service: '1000', pauseMs: 15_000, timeoutSeconds: 20, extraArgs: ['-set', 'rtp_port', String(rtp.port)] });
    await waitFor(async () => (rtp.audibleSince(0) >= 10 ? true : undefined), 10_000, 'the greeting');
    const call = await gatewayA.activeCall();
    await new Promise((resolve) => setTimeout(resolve, 800));
    rtp.press('1');
    const booking = await waitFor(async () => (await worker.operations(call.session_id)).find((op) => op.action === 'book_table' && op.state === 'COMMITTED'), 10_000, 'the booking to commit');
    // The gate has decided: tell the caller once the agent stops talking. Nothing has been said yet.
    const decided = await waitFor(async () => (await gatewayA.timeline(call.session_id)).find((e) => e.type === 'gate_decision' && e.detail.operationId === booking.operation_id), 5_000, 'the gate decision');
    expect(decided.detail).toMatchObject({ decision: 'speak_when_idle' });
    const beforeCrash = await gatewayA.timeline(call.session_id);
    expect(beforeCrash.some((e) => e.type === 'result_spoken' || e.type === 'delivered')).toBe(false);
    gatewayA.proc.child.kill('SIGKILL');
    await gatewayA.proc.exited;
    rtp.close();
    callers.splice(callers.indexOf(rtp), 1);

    const gatewayB = await startCallgate({ script: SCRIPT, shared, role: 'gateway', gatewayId: 'gw-b' });
    started.push(gatewayB);
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

    // The call's record, read through the replacement: never spoken, delivered once, out of band, after the commit.
    const timeline = await gatewayB.timeline(call.session_id);
    expect(timeline.some((e) => e.type === 'result_spoken')).toBe(false);
    expect(timeline.filter((e) => e.type === 'delivered').map((e) => e.detail.channel)).toEqual(['out_of_band']);
    const committedAt = timeline.find((e) => e.type === 'operation_committed' && e.detail.operation_id === booking.operation_id)?.at ?? NaN;
    const outOfBandAt = timeline.find((e) => e.type === 'delivered')?.at ?? NaN;
    expect(committedAt).toBeLessThan(outOfBandAt);
    expect((await lostCall).exitCode).not.toBe(0);
  });
});
