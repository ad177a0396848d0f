import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_SCRIPT_PATH } from '../../../gateway/realtime/simulator/simulator-script.ts';
import { eventsOf, startHarness, waitFor, type Harness } from './realtime-harness.ts';

const demo = { simulator: { scriptPath: DEMO_SCRIPT_PATH } };

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('when a caller books a table by speaking to the demo script', () => {
  it('should check availability, then book on the second utterance, speaking each result', async () => {
    harness = await startHarness(demo);
    const { client, connection, events } = harness;
    client.on('function_call', (call) => {
      const args = call.arguments as Record<string, unknown>;
      client.sendToolOutput(
        call.callId,
        call.name === 'handoff'
          ? { status: 'ok', agent: args.agent }
          : { status: call.name === 'check_availability' ? 'ok' : 'started' },
      );
    });
    client.createResponse();
    await waitFor('the greeting', () => eventsOf(events, 'response_done').length === 1);
    connection.session.callerSays('I would like a table for four tonight.');
    await waitFor('availability spoken', () => eventsOf(events, 'response_done').length === 3);
    connection.session.callerSays('Yes, book it please.');
    await waitFor('booking spoken', () => eventsOf(events, 'response_done').length === 5);
    expect(
      connection.session.toolCalls.map((c) => [c.name, JSON.parse(c.arguments) as unknown]),
    ).toEqual([
      ['handoff', { agent: 'reservations' }],
      [
        'check_availability',
        { restaurant: 'trattoria-roma', date: '2026-12-24', time: '19:30', party_size: 4 },
      ],
      [
        'book_table',
        {
          restaurant: 'trattoria-roma',
          date: '2026-12-24',
          time: '19:30',
          party_size: 4,
          name: 'Alex Morgan',
        },
      ],
    ]);
    expect(connection.session.said.map((s) => s.text)).toEqual([
      expect.stringMatching(
        /^Hello, thanks for calling the Blue Harbour restaurant\. Press 1/,
      ) as string,
      'Let me check what we have free.',
      'There are tables free that evening. Press 1 and I will book one for you.',
      'Great, I am booking it now.',
      'I have started your booking; I will confirm it as soon as the restaurant does.',
    ]);
    expect(connection.session.heard.map((h) => h.kind)).toEqual([
      'caller_said',
      'tool_output',
      'tool_output',
      'caller_said',
      'tool_output',
    ]);
  });
});

describe('when the caller uses the keypad with the demo script', () => {
  it.each([
    ['3', ['transfer_to_human'], 'Of course. I am transferring you to a colleague now.'],
    ['*', ['cancel_operation'], 'Okay, I will cancel that request.'],
    ['1', ['handoff', 'book_table'], 'Let me book that for you.'],
    ['2', ['handoff', 'refund'], 'I can help with a refund. One moment while I start it.'],
    ['4', ['handoff', 'book_table'], 'Let me move your booking to half past eight.'],
    [
      '5',
      ['handoff', 'check_availability', 'check_availability'],
      'Let me see which later times are free.',
    ],
  ])('should answer digit %s with calls to %j', async (digit, tools, line) => {
    harness = await startHarness(demo);
    const { client, connection, events } = harness;
    client.sendDtmf(digit);
    await waitFor('the response', () => eventsOf(events, 'response_done')[0]);
    expect(eventsOf(events, 'function_call').map((c) => c.name)).toEqual(tools);
    expect(connection.session.said.map((s) => s.text)).toEqual([line]);
    expect(connection.session.heard).toEqual([
      { kind: 'dtmf', digit, atMs: expect.any(Number) as number },
    ]);
  });

  it('should speak an injected system message', async () => {
    harness = await startHarness(demo);
    const { client, connection, events } = harness;
    client.addSystemMessage('Your refund of 42 euros has been approved.');
    client.createResponse();
    await waitFor('the response', () => eventsOf(events, 'response_done')[0]);
    expect(connection.session.said.map((s) => s.text)).toEqual([
      'Your refund of 42 euros has been approved.',
    ]);
  });
});
