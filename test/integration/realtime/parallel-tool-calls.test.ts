import { afterEach, describe, expect, it } from 'vitest';
import {
  conversationWire,
  eventsOf,
  startHarness,
  waitFor,
  type Harness,
} from './realtime-harness.ts';
import type { RealtimeEventOf } from '../../../gateway/realtime/realtime-session.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function availability(call: RealtimeEventOf<'function_call'>): {
  status: string;
  time: string;
  party_size: number;
  date: string;
} {
  const args = call.arguments as { time: string; party_size: number; date: string };
  return { status: 'free', time: args.time, party_size: args.party_size, date: args.date };
}

/** After the dispatching response.done and both outputs: exactly one response.create, then the answer. */
function assertOneFollowUp(wire: readonly string[]): void {
  const dispatchDone = wire.indexOf('< response.done');
  const creates = wire.flatMap((entry, index) => (entry === '> response.create' ? [index] : []));
  expect(creates).toHaveLength(2);
  const followUp = creates[1] ?? -1;
  expect(followUp).toBeGreaterThan(dispatchDone);
  const outputs = wire.flatMap((entry, index) =>
    entry === '> conversation.item.create' ? [index] : [],
  );
  // The DTMF system message, then two function_call_output items.
  expect(outputs).toHaveLength(3);
  expect(followUp).toBeGreaterThan(Math.max(...outputs));
}

describe('when the model calls two tools in one response', () => {
  it('should send one response.create after the response is done and both outputs are sent, outputs in reverse order', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    client.sendDtmf('4');
    const done = await waitFor(
      'the dispatching response',
      () => eventsOf(events, 'response_done')[0],
    );
    const calls = eventsOf(events, 'function_call');
    expect(calls.map((c) => c.name)).toEqual(['check_availability', 'check_availability']);
    expect(done.callIds).toEqual(calls.map((c) => c.callId));
    const [first, second] = calls;
    if (first === undefined || second === undefined) throw new Error('two calls expected');
    // The second tool finishes first; the follow-up must wait for the first one.
    client.sendToolOutput(second.callId, availability(second));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(connection.session.receivedTypes().filter((t) => t === 'response.create')).toHaveLength(
      1,
    );
    client.sendToolOutput(first.callId, availability(first));
    await waitFor('the follow-up response', () => eventsOf(events, 'response_done').length === 2);
    assertOneFollowUp(conversationWire(connection));
    expect(connection.session.said.at(-1)?.text).toBe(
      'A table for 4 on 2026-12-24 at 21:00 is free. Shall I book it? A table for 4 on 2026-12-24 at 20:30 is free. Shall I book it?',
    );
  });

  it('should send one response.create when both outputs are sent before the response is done', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    // Outputs go out the moment each call completes, while the response is still open.
    client.on('function_call', (call) => client.sendToolOutput(call.callId, availability(call)));
    client.sendDtmf('4');
    await waitFor('the follow-up response', () => eventsOf(events, 'response_done').length === 2);
    const wire = conversationWire(connection);
    const dispatchDone = wire.indexOf('< response.done');
    const outputs = wire.flatMap((entry, index) =>
      entry === '> conversation.item.create' ? [index] : [],
    );
    expect(outputs.slice(1).every((index) => index < dispatchDone)).toBe(true);
    assertOneFollowUp(wire);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connection.session.receivedTypes().filter((t) => t === 'response.create')).toHaveLength(
      2,
    );
  });
});

describe('when a tool output names the call of a single tool', () => {
  it('should speak the templated result in the follow-up', async () => {
    harness = await startHarness();
    const { client, connection, events } = harness;
    client.on('function_call', (call) =>
      client.sendToolOutput(call.callId, {
        status: 'started',
        message: 'You will get a text when it is done.',
      }),
    );
    client.sendDtmf('2');
    await waitFor('the follow-up response', () => eventsOf(events, 'response_done').length === 2);
    expect(
      connection.session.toolCalls.map((c) => [c.name, JSON.parse(c.arguments) as unknown]),
    ).toEqual([
      [
        'refund',
        { order_id: 'A-10293', amount: 42.5, currency: 'EUR', reason: 'order arrived cold' },
      ],
    ]);
    expect(connection.session.said.map((s) => s.text)).toEqual([
      'I can help with a refund. One moment while I start it.',
      'Your refund is started. You will get a text when it is done.',
    ]);
    expect(connection.session.heard.map((h) => h.kind)).toEqual(['dtmf', 'tool_output']);
  });
});
