/**
 * `npm run demo` is the README's showcase: it must place a real call to a callgate it starts
 * itself, tell the story in causal order (barge-in, booking, change of mind, hang-up before the
 * result, the result by SMS), and leave nothing running.
 */
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../gateway/demo/demo-call.ts';
import { formatDemoReport, type DemoEntry } from '../../gateway/demo/demo-report.ts';

describe('when the demo calls a fresh callgate', () => {
  it(
    'should print a timeline with the key events in causal order, end with the 20:30 booking told by SMS, and stop everything',
    { timeout: 90_000 },
    async () => {
      const progress: string[] = [];
      const report = await runDemo({ progress: (line) => progress.push(line) });
      expect(report.problems).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.durationMs).toBeLessThan(60_000);

      const { entries, operations } = report;
      const early = operations.find(
        (op) => op.action === 'book_table' && op.params?.time === '19:30',
      );
      const late = operations.find(
        (op) => op.action === 'book_table' && op.params?.time === '20:30',
      );
      expect(early?.state).toBe('CANCELLED');
      expect(late?.state).toBe('COMMITTED');
      expect(late?.delivery).toMatchObject({
        decision: 'deliver_out_of_band',
        channel: 'out_of_band',
        delivered: false,
      });
      expect(late?.out_of_band).toMatchObject({ sms: { state: 'delivered' } });
      expect(late?.delivery?.reasons).toContain('caller_hung_up');
      expect(operations.filter((op) => op.action === 'book_table')).toHaveLength(2);

      // The story, each step after the one before it.
      const at = (description: string, predicate: (e: DemoEntry) => boolean): number => {
        const found = entries.find(predicate);
        expect(found, description).toBeDefined();
        return found?.at ?? NaN;
      };
      const steps = [
        at(
          'the INVITE went out',
          (e) => e.type === 'sip_sent' && String(e.detail.firstLine).startsWith('INVITE '),
        ),
        at(
          'callgate answered 200',
          (e) => e.type === 'sip_received' && String(e.detail.firstLine).startsWith('SIP/2.0 200'),
        ),
        at('the caller spoke over the greeting', (e) => e.type === 'said'),
        at('callgate saw the barge-in', (e) => e.type === 'barge_in'),
        at(
          'the model asked for the 19:30 booking',
          (e) =>
            e.type === 'tool_requested' &&
            (e.detail.args as { time?: string }).time === '19:30' &&
            e.detail.tool === 'book_table',
        ),
        at(
          'the 19:30 booking ran',
          (e) => e.type === 'operation_running' && e.detail.operation_id === early?.operation_id,
        ),
        at('the caller pressed 4', (e) => e.type === 'pressed' && e.detail.digit === '4'),
        at(
          'the 19:30 booking was superseded',
          (e) => e.type === 'superseded' && e.detail.operationId === early?.operation_id,
        ),
        at('the caller hung up', (e) => e.type === 'hangup'),
        at(
          'the BYE went out',
          (e) => e.type === 'sip_sent' && String(e.detail.firstLine).startsWith('BYE '),
        ),
        at('the call ended', (e) => e.type === 'ended' && e.detail.reason === 'caller_hung_up'),
        at(
          'the 20:30 booking committed',
          (e) => e.type === 'operation_committed' && e.detail.operation_id === late?.operation_id,
        ),
        at(
          'the gate sent it out of band',
          (e) =>
            e.type === 'gate_decision' &&
            e.detail.operationId === late?.operation_id &&
            e.detail.decision === 'deliver_out_of_band',
        ),
        at(
          'the SMS arrived',
          (e) => e.type === 'out_of_band_message' && e.detail.operationId === late?.operation_id,
        ),
      ];
      expect([...steps].sort((a, b) => a - b)).toEqual(steps);
      // The 19:30 booking never reached the restaurant's book, and the caller was never told it.
      expect(
        entries.some(
          (e) => e.type === 'operation_committed' && e.detail.operation_id === early?.operation_id,
        ),
      ).toBe(false);
      expect(
        entries.some(
          (e) => e.type === 'result_spoken' && e.detail.operationId === early?.operation_id,
        ),
      ).toBe(false);
      expect(report.effects.filter((e) => e.operation === 'book').map((e) => e.reference)).toEqual([
        late?.operation_id,
      ]);
      expect(report.messages.map((m) => [m.operationId, m.deliveries])).toEqual([
        [late?.operation_id, 1],
      ]);

      // What the caller heard: part of the greeting (cut by the barge-in), then the agent's answers.
      const bargeIn = steps[3] ?? NaN;
      const heard = entries.filter((e) => e.type === 'hearing');
      expect(heard.filter((e) => e.at < bargeIn).length).toBeGreaterThan(0);
      expect(heard.filter((e) => e.at > bargeIn).length).toBeGreaterThanOrEqual(3);
      expect(entries.find((e) => e.type === 'barge_in')?.detail.playedMs).toBeGreaterThan(1_000);

      const text = formatDemoReport(report);
      for (const words of [
        'TIMELINE of call',
        'BARGE-IN',
        'GATE op3 book_table 20:30 (COMMITTED): deliver_out_of_band, because caller_hung_up',
        'OUT-OF-BAND MESSAGES',
        'FINAL LEDGER',
        'OK: ',
      ])
        expect(text).toContain(words);
      expect(progress[0]).toMatch(/starting a fresh callgate/);

      // Nothing left running: the demo's callgate no longer answers.
      expect(report.callgate?.started).toBe(true);
      await expect(fetch(`${report.callgate?.httpUrl ?? ''}/healthz`)).rejects.toThrow();
    },
  );
});
