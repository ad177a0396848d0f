/**
 * The demo's verdict (pure): the story it tells holds only when every step happened, in order.
 * One good run, then each way it can go wrong, one row each.
 */
import { describe, expect, it } from 'vitest';
import {
  checkDemoStory,
  type DemoEntry,
  type DemoMessage,
  type DemoOperation,
} from '../../../gateway/demo/demo-report.ts';

const EARLY = 'op_early';
const LATE = 'op_late';
const entry = (
  at: number,
  source: DemoEntry['source'],
  type: string,
  detail: Record<string, unknown> = {},
): DemoEntry => ({ at, source, type, text: type, detail });

function goodRun(): {
  entries: DemoEntry[];
  operations: DemoOperation[];
  messages: DemoMessage[];
  effects: { operation: string; reference?: string }[];
} {
  return {
    entries: [
      entry(0, 'sip', 'sip_sent', { firstLine: 'INVITE sip:1000@127.0.0.1 SIP/2.0' }),
      entry(100, 'sip', 'sip_received', { firstLine: 'SIP/2.0 200 OK' }),
      entry(2_000, 'callgate', 'barge_in'),
      entry(8_000, 'callgate', 'tool_requested', { tool: 'book_table', args: { time: '19:30' } }),
      entry(20_000, 'caller', 'pressed', { digit: '4' }),
      entry(23_000, 'callgate', 'tool_requested', { tool: 'book_table', args: { time: '20:30' } }),
      entry(23_100, 'gate', 'superseded', { operationId: EARLY, by: LATE, action: 'cancelled' }),
      entry(23_200, 'caller', 'hangup'),
      entry(26_000, 'ledger', 'operation_committed', { operation_id: LATE }),
      entry(26_010, 'gate', 'gate_decision', {
        operationId: LATE,
        decision: 'deliver_out_of_band',
        reasons: ['caller_hung_up', 'committed'],
      }),
    ],
    operations: [
      {
        operation_id: EARLY,
        action: 'book_table',
        state: 'CANCELLED',
        params: { time: '19:30' },
        delivery: {
          decision: 'suppress',
          reasons: ['superseded_no_effect'],
          delivered: false,
          channel: 'none',
        },
      },
      {
        operation_id: LATE,
        action: 'book_table',
        state: 'COMMITTED',
        params: { time: '20:30' },
        delivery: {
          decision: 'deliver_out_of_band',
          reasons: ['caller_hung_up'],
          delivered: false,
          channel: 'out_of_band',
        },
        out_of_band: { sms: { state: 'delivered' } },
      },
    ],
    messages: [
      { channel: 'sms', operationId: LATE, body: { text: 'confirmed' }, at: 26_100, deliveries: 1 },
    ],
    effects: [{ operation: 'book', reference: LATE }],
  };
}

type Run = ReturnType<typeof goodRun>;
const without = (run: Run, type: string): Run => ({
  ...run,
  entries: run.entries.filter((e) => e.type !== type),
});
const moved = (run: Run, type: string, at: number): Run => ({
  ...run,
  entries: run.entries.map((e) => (e.type === type ? { ...e, at } : e)).sort((a, b) => a.at - b.at),
});
const withOp = (run: Run, id: string, change: Partial<DemoOperation>): Run => ({
  ...run,
  operations: run.operations.map((o) => (o.operation_id === id ? { ...o, ...change } : o)),
});

describe('when the demo checks its story', () => {
  it('should find nothing wrong with a run that went as told', () => {
    expect(checkDemoStory({ ...goodRun(), sandbox: true })).toEqual([]);
  });

  it('should accept a 19:30 booking that committed and was undone by a compensation', () => {
    expect(
      checkDemoStory({
        ...withOp(goodRun(), EARLY, { state: 'COMMITTED', compensated_by: 'op_undo' }),
        sandbox: true,
      }),
    ).toEqual([]);
  });

  const broken: [string, Run, RegExp][] = [
    ['no barge-in', without(goodRun(), 'barge_in'), /did not barge in/],
    [
      'the barge-in after the first tool call',
      moved(goodRun(), 'barge_in', 9_000),
      /barge-in did not come before the first tool call/,
    ],
    [
      'no 20:30 booking',
      { ...goodRun(), operations: goodRun().operations.filter((o) => o.operation_id !== LATE) },
      /expected a 19:30 and a 20:30 booking/,
    ],
    [
      '19:30 still booked',
      withOp(goodRun(), EARLY, { state: 'COMMITTED' }),
      /19:30 booking ended COMMITTED/,
    ],
    [
      '20:30 failed',
      withOp(goodRun(), LATE, { state: 'FAILED_FINAL' }),
      /20:30 booking ended FAILED_FINAL/,
    ],
    [
      'hung up after the commit',
      moved(goodRun(), 'hangup', 27_000),
      /did not hang up before the 20:30 booking was confirmed/,
    ],
    [
      'told by voice instead',
      withOp(goodRun(), LATE, {
        delivery: { decision: 'spoken', reasons: ['committed'], delivered: true, channel: 'voice' },
      }),
      /not recorded as delivered out of band/,
    ],
    [
      'two SMS',
      {
        ...goodRun(),
        messages: [
          ...goodRun().messages,
          { channel: 'sms', operationId: LATE, body: {}, at: 27_000, deliveries: 1 },
        ],
      },
      /one out-of-band message/,
    ],
    [
      'an SMS sent twice',
      {
        ...goodRun(),
        messages: [{ channel: 'sms', operationId: LATE, body: {}, at: 26_100, deliveries: 2 }],
      },
      /one out-of-band message/,
    ],
    [
      'both tables held',
      {
        ...goodRun(),
        effects: [
          { operation: 'book', reference: EARLY },
          { operation: 'book', reference: LATE },
        ],
      },
      /should hold only the 20:30 booking/,
    ],
  ];
  it.each(broken)('should say what went wrong when there is %s', (_, run, problem) => {
    const problems = checkDemoStory({ ...run, sandbox: true });
    expect(problems).toEqual(expect.arrayContaining([expect.stringMatching(problem)]));
  });
});
