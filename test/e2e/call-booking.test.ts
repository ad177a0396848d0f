import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/processes.ts';
import { CallerRtp } from './caller-rtp.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';
import { sandboxMessages } from '../support/sandbox-messages.ts';

/** A short greeting, and key 1 books a table (one mutating tool call). */
const BOOKING_SCRIPT = {
  name: 'e2e-booking',
  greeting: 'Hello, Blue Harbour.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'trattoria-roma',
            date: '2031-05-17',
            time: '19:30',
            party_size: 4,
            name: 'Alex Morgan',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'Your table is {output.status|being booked}.' },
  // The gateway's result message is long (ids, details); the simulator speaks a short line for it.
  systemMessage: 'Good news, your table is confirmed.',
};

/** The caller stays on the line this long: greeting, key press, tool turn, commit and the spoken result. */
const CALL_HOLD_MS = 12_000;

interface CallView {
  session_id: string;
  state: string;
  end_reason?: string;
  caller: string;
}
interface OperationView {
  operation_id: string;
  action: string;
  state: string;
  session_id: string;
  delivery?: { decision: string; reasons: string[]; delivered: boolean; channel: string };
}
interface TimelineView {
  timeline: { at: number; source: string; type: string; detail: Record<string, unknown> }[];
}

let callgate: CallgateProcess | undefined;
let caller: CallerRtp | undefined;
afterEach(async () => {
  caller?.close();
  caller = undefined;
  await callgate?.stop();
  callgate = undefined;
});

describe('when a caller dials the demo number over SIP and presses 1 to book a table', () => {
  it(
    'should commit one booking, record the gate decision on it, and send the agent’s audio back over RTP',
    { timeout: 90_000 },
    async () => {
      const cg = await startCallgate({ script: BOOKING_SCRIPT, agent: 'reservations' });
      callgate = cg;
      const rtp = await CallerRtp.open();
      caller = rtp;
      const sipp = runSipp({
        scenario: 'uac-call-external-rtp.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: '1000',
        pauseMs: CALL_HOLD_MS,
        timeoutSeconds: 40,
        extraArgs: ['-set', 'rtp_port', String(rtp.port)],
      });

      // The greeting reaches the caller first; the key is pressed once it has been heard. The call
      // rings until its model session is open, and the hold starts at the answer: a slow start
      // on a loaded machine delays the greeting without shortening the call.
      await waitFor(
        async () => (rtp.audibleSince(0) >= 25 ? true : undefined),
        25_000,
        'the greeting over RTP',
      );
      const call = await waitFor(
        async () => (await cg.get<{ active: CallView[] }>('/v1/calls')).active[0],
        5_000,
        'the call in the session registry',
      );
      expect(call).toMatchObject({ state: 'active', caller: '+15550123' });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const pressedAt = Date.now();
      rtp.press('1');

      const booking = await waitFor(
        async () =>
          (
            await cg.get<{ operations: OperationView[] }>(
              `/v1/operations?session_id=${call.session_id}`,
            )
          ).operations.find((op) => op.action === 'book_table' && op.state === 'COMMITTED'),
        15_000,
        'the booking to commit',
      );
      const decided = await waitFor(
        async () => {
          const op = (
            await cg.get<{ operation: OperationView }>(`/v1/operations/${booking.operation_id}`)
          ).operation;
          return op.delivery?.delivered === true ? op : undefined;
        },
        20_000,
        'the result to be delivered',
      );

      const result = await sipp;

      // The call is over: the phone stops sending, or its stray RTP could reach the next call on that port.

      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.successful).toBe(1);
      expect(result.firstLines).toEqual([
        'sent INVITE sip:1000@127.0.0.1:' + cg.sipPort + ' SIP/2.0',
        'received SIP/2.0 100 Trying',
        // Ringing while the model session opens: the call is answered once its agent can speak.
        'received SIP/2.0 180 Ringing',
        'received SIP/2.0 200 OK',
        expect.stringMatching(/^sent ACK/),
        expect.stringMatching(/^sent BYE/),
        'received SIP/2.0 200 OK',
      ]);

      // The ledger: one committed booking of this call, with the gate's decision and reasons on it.
      const operations = (
        await cg.get<{ operations: OperationView[] }>(
          `/v1/operations?session_id=${call.session_id}`,
        )
      ).operations;
      expect(operations.filter((op) => op.action === 'book_table')).toHaveLength(1);
      expect(decided.state).toBe('COMMITTED');
      expect(decided.delivery).toMatchObject({
        decision: 'spoken',
        channel: 'voice',
        delivered: true,
      });
      expect(decided.delivery?.reasons).toContain('committed');

      // The system of record: exactly one booking effect, carrying our operation id.
      const effects = (
        await cg.get<{ effects: { service: string; operation: string; reference?: string }[] }>(
          `${cg.sandboxUrl}/admin/effects?service=bookings`,
        )
      ).effects;
      expect(effects).toHaveLength(1);
      expect(effects[0]?.reference).toBe(booking.operation_id);
      // Told on the call, so nothing goes out of band.
      expect(await sandboxMessages(cg.sandboxUrl, booking.operation_id)).toEqual([]);

      // The wire back to the caller: PCMU from one SSRC, and speech after the key press (the agent's answer).
      const audio = rtp.received.filter((p) => p.payloadType === 0);
      expect(audio.length).toBeGreaterThan(100);
      expect(new Set(audio.map((p) => p.ssrc)).size).toBe(1);
      expect(rtp.audibleSince(pressedAt)).toBeGreaterThan(25);

      // The call's own record: the digit came over RTP, the tool started the operation, the caller hung up.
      const ended = await waitFor(
        async () =>
          (await cg.get<{ recent: CallView[] }>('/v1/calls')).recent.find(
            (c) => c.session_id === call.session_id,
          ),
        5_000,
        'the call among recent calls',
      );
      expect(ended).toMatchObject({ state: 'ended', end_reason: 'caller_hung_up' });
      const timeline = (await cg.get<TimelineView>(`/v1/calls/${call.session_id}/timeline`))
        .timeline;
      const types = timeline.map((e) => `${e.source}:${e.type}`);
      expect(timeline.find((e) => e.type === 'answered')?.detail).toMatchObject({
        codec: 'PCMU',
        passthrough: true,
      });
      expect(timeline.find((e) => e.type === 'dtmf')?.detail).toEqual({
        digit: '1',
        source: 'rtp',
      });
      expect(timeline.find((e) => e.type === 'tool_call')?.detail).toMatchObject({
        name: 'book_table',
        status: 'started',
        operationId: booking.operation_id,
      });
      const spoken = timeline.find((e) => e.type === 'result_spoken');
      expect(spoken?.detail).toMatchObject({
        operationId: booking.operation_id,
        status: 'completed',
      });
      // The spoken acknowledgement reached the caller as audio: RTP with speech after its response began.
      const ackResponse = timeline.find(
        (e) =>
          e.type === 'response' &&
          e.detail.state === 'created' &&
          e.detail.responseId === spoken?.detail.responseId,
      );
      expect(ackResponse).toBeDefined();
      expect(rtp.audibleSince(ackResponse?.at ?? Infinity)).toBeGreaterThan(25);
      // Causal order: key press, tool request, commit, gate decision, spoken result, end of the call.
      const order = [
        'call:dtmf',
        'audit:tool_requested',
        'operation:operation_committed',
        'audit:gate_decision',
        'audit:delivered',
        'call:ended',
      ].map((t) => types.indexOf(t));
      expect(
        order.every((i) => i >= 0),
        types.join(', '),
      ).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);

      // The operator's page shows the same call: its operation with the gate's decision, and the events.
      const page = await cg.operatorFetch(`/calls/${call.session_id}`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await page.text();
      expect(html).toContain(
        `<td>${booking.operation_id}</td><td>book_table</td><td>COMMITTED</td><td>spoken</td>`,
      );
      for (const type of [
        'answered',
        'dtmf',
        'tool_requested',
        'operation_committed',
        'gate_decision',
        'delivered',
        'ended',
      ])
        expect(html).toContain(`<td>${type}</td>`);

      // The metrics lead back to the same call: the commit-to-audible observation's exemplar names it and its operation.
      const scrape = await fetch(`${cg.httpUrl}/metrics`, {
        headers: { accept: 'application/openmetrics-text;version=1.0.0' },
      });
      const audible = (await scrape.text())
        .split('\n')
        .filter(
          (l) =>
            l.startsWith('callgate_commit_to_audible_seconds_bucket{') &&
            l.includes('action="book_table"') &&
            l.includes(' # {'),
        );
      expect(audible).toHaveLength(1);
      expect(audible[0]).toContain(
        `# {session_id="${call.session_id}",operation_id="${booking.operation_id}"}`,
      );
    },
  );
});
