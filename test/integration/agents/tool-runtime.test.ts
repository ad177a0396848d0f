import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolRuntime } from '../../../agents/tool-runtime.ts';
import {
  authorization,
  confirmation,
  limits,
  redaction,
  type BeforeToolPlugin,
} from '../../../agents/tool-plugins.ts';
import { AVAILABILITY, BOOK, booking, quietLog, REFUND } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';

let a: AgentsHarness;
const TENANT = 'tenant-tools';

beforeAll(async () => {
  a = await startAgentsHarness({
    tenants: {
      [TENANT]: {
        book_table: BOOK,
        check_availability: AVAILABILITY,
        refund: { ...REFUND, confirmAbove: 100 },
      },
      'tenant-bare': { book_table: BOOK },
    },
  });
});
afterAll(async () => a.close());

const bookArgs = () => ({
  restaurant: 'sushi-kaito',
  date: booking().date,
  time: '19:00',
  party_size: 2,
  name: 'Ada',
});

function runtimeWith(before: BeforeToolPlugin[]): ToolRuntime {
  return new ToolRuntime({
    catalogue: a.catalogue,
    tenants: new Map(a.h.config.tenants.map((t) => [t.id, t])),
    actions: a.h.layer,
    audit: a.audit,
    log: quietLog,
    before,
    after: [redaction()],
  });
}

describe('when the model sends bad arguments or unknown tools', () => {
  it.each([
    [
      'a tool the agent does not have',
      'refund',
      { order_id: 'ord_1001', amount_cents: 5 },
      'unknown_tool',
    ],
    ['arguments that are not JSON', 'book_table', '{"restaurant": "sushi', 'invalid_arguments'],
    [
      'a bad date',
      'book_table',
      { restaurant: 'sushi-kaito', date: 'tomorrow', time: '19:00', party_size: 2, name: 'A' },
      'invalid_arguments',
    ],
    [
      'an unknown restaurant',
      'book_table',
      { restaurant: 'nowhere', date: '2030-01-01', time: '19:00', party_size: 2, name: 'A' },
      'invalid_arguments',
    ],
    [
      'a missing name',
      'book_table',
      { restaurant: 'sushi-kaito', date: '2030-01-01', time: '19:00', party_size: 2 },
      'invalid_arguments',
    ],
  ])(
    'should answer %s with a structured error and admit nothing',
    async (_name, tool, args, error) => {
      const { session } = a.call(TENANT, 'reservations');
      const output = await a.runtime.handle(session, { callId: 'c1', name: tool, arguments: args });
      expect(output).toMatchObject({ status: 'error', error });
      expect(await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).toHaveLength(0);
    },
  );

  it('should list which arguments were wrong', async () => {
    const { session } = a.call(TENANT, 'reservations');
    const output = await a.runtime.handle(session, {
      callId: 'c1',
      name: 'book_table',
      arguments: { restaurant: 'sushi-kaito', date: 'x', time: '25:00', party_size: 0, name: 'A' },
    });
    expect(output.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^date: /),
        expect.stringMatching(/^time: /),
        expect.stringMatching(/^party_size: /),
      ]),
    );
  });
});

describe('when before-tool plugins run', () => {
  it('should refuse the call when a plugin throws (fail closed), and admit nothing', async () => {
    const broken: BeforeToolPlugin = {
      name: 'fraud-check',
      check: () => {
        throw new Error('fraud service down');
      },
    };
    const { session } = a.call(TENANT, 'reservations');
    const output = await runtimeWith([authorization(), broken]).handle(session, {
      callId: 'c1',
      name: 'book_table',
      arguments: bookArgs(),
    });
    expect(output).toMatchObject({ status: 'rejected', message: 'the fraud-check check failed' });
    expect(await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).toHaveLength(0);
    expect((await a.audit.read(session.sessionId)).map((r) => r.event)).toContainEqual(
      expect.objectContaining({ type: 'tool_refused', by: 'fraud-check' }),
    );
  });

  it('should refuse a tool whose action the tenant does not offer', async () => {
    const { session } = a.call('tenant-bare', 'reservations');
    const output = await a.runtime.handle(session, {
      callId: 'c1',
      name: 'check_availability',
      arguments: { restaurant: 'sushi-kaito', date: '2030-01-01' },
    });
    expect(output).toMatchObject({
      status: 'rejected',
      message: 'this line does not offer check_availability',
    });
  });

  it('should ask for confirmation above the threshold and admit only once confirmed', async () => {
    const { session } = a.call(TENANT, 'billing');
    const ask = await a.runtime.handle(session, {
      callId: 'c1',
      name: 'refund',
      arguments: { order_id: 'ord_1030', amount_cents: 15_000 },
    });
    expect(ask).toMatchObject({ status: 'needs_confirmation' });
    expect(await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).toHaveLength(0);
    const small = await a.runtime.handle(session, {
      callId: 'c2',
      name: 'refund',
      arguments: { order_id: 'ord_1030', amount_cents: 500 },
    });
    expect(small).toMatchObject({ status: 'started' });
    const confirmed = await a.runtime.handle(session, {
      callId: 'c3',
      name: 'refund',
      arguments: { order_id: 'ord_1031', amount_cents: 15_000, confirmed: true },
    });
    expect(confirmed).toMatchObject({ status: 'started' });
  });

  it('should refuse above the amount ceiling and beyond the frequency limit', async () => {
    const runtime = runtimeWith([
      authorization(),
      confirmation(),
      limits({ maxAmount: 1_000, perMinute: 2 }),
    ]);
    const { session } = a.call(TENANT, 'billing');
    expect(
      await runtime.handle(session, {
        callId: 'c1',
        name: 'refund',
        arguments: { order_id: 'ord_1032', amount_cents: 200_000, confirmed: true },
      }),
    ).toMatchObject({ status: 'rejected', message: 'amounts above 1000 need a person' });
    const { session: s2 } = a.call(TENANT, 'reservations');
    expect(
      (await runtime.handle(s2, { callId: 'c1', name: 'book_table', arguments: bookArgs() }))
        .status,
    ).toBe('started');
    expect(
      (await runtime.handle(s2, { callId: 'c2', name: 'book_table', arguments: bookArgs() }))
        .status,
    ).toBe('started');
    expect(
      await runtime.handle(s2, { callId: 'c3', name: 'book_table', arguments: bookArgs() }),
    ).toMatchObject({
      status: 'rejected',
      message: 'too many changes in a short time; a person will help',
    });
  });
});

describe('when the model repeats a request', () => {
  it('should answer duplicate by idempotency key, whatever the call id, and start nothing new', async () => {
    const { session } = a.call(TENANT, 'reservations');
    const args = bookArgs();
    const first = await a.runtime.handle(session, {
      callId: 'call_1',
      name: 'book_table',
      arguments: args,
    });
    const again = await a.runtime.handle(session, {
      callId: 'call_2',
      name: 'book_table',
      arguments: { ...args, name: ' Ada ' },
    });
    expect(first.status).toBe('started');
    expect(again).toMatchObject({ status: 'duplicate', operation_id: first.operation_id });
    expect(await a.h.layer.ledger.listBySession(TENANT, session.sessionId)).toHaveLength(1);
  });
});

describe('when many tools run at once in one call', () => {
  it('should answer busy beyond the per-call limit', async () => {
    const { session } = a.call(TENANT, 'reservations');
    await a.h.sandbox.addRule({ fault: 'latency=500', tenant: TENANT, operation: 'availability' });
    const reads = Array.from({ length: 6 }, (_, i) =>
      a.runtime.handle(session, {
        callId: `r${i}`,
        name: 'check_availability',
        arguments: { restaurant: 'bistro-nord', date: `2034-02-0${i + 1}` },
      }),
    );
    const outputs = await Promise.all(reads);
    // The tenant's maxToolsPerSession is 4 (the default).
    expect(outputs.filter((o) => o.status === 'busy')).toHaveLength(2);
    expect(outputs.filter((o) => o.status === 'ok')).toHaveLength(4);
    expect(outputs.find((o) => o.status === 'ok')?.result).toHaveProperty('slots');
  });
});

describe('when control tools are used', () => {
  it('should tell the state of an operation of this call only, and cancel through the ledger', async () => {
    const { session } = a.call(TENANT, 'reservations');
    await a.h.sandbox.addRule({ fault: 'latency=800', tenant: TENANT, operation: 'book', nth: 1 });
    const started = await a.runtime.handle(session, {
      callId: 'c1',
      name: 'book_table',
      arguments: bookArgs(),
    });
    const id = String(started.operation_id);
    const status = await a.runtime.handle(session, {
      callId: 'c2',
      name: 'operation_status',
      arguments: { operation_id: id },
    });
    expect(status).toMatchObject({ status: 'ok', operation_id: id });
    const other = a.call(TENANT, 'reservations').session;
    expect(
      await a.runtime.handle(other, {
        callId: 'c3',
        name: 'operation_status',
        arguments: { operation_id: id },
      }),
    ).toMatchObject({ status: 'error', error: 'not_found' });
    expect(
      await a.runtime.handle(other, {
        callId: 'c4',
        name: 'cancel_operation',
        arguments: { operation_id: id },
      }),
    ).toMatchObject({ status: 'error', error: 'not_found' });
    const unknownAgent = await a.runtime.handle(session, {
      callId: 'c5',
      name: 'handoff',
      arguments: { agent: 'astronaut' },
    });
    expect(unknownAgent).toMatchObject({ status: 'rejected', error: 'unknown_agent' });
    expect(session.activeAgent).toBe('reservations');
    // A handoff to the agent already on the call changes nothing and is not an error.
    const same = await a.runtime.handle(session, {
      callId: 'c6',
      name: 'handoff',
      arguments: { agent: 'reservations' },
    });
    expect(same).toMatchObject({ status: 'ok', agent: 'reservations' });
    expect(session.activeAgent).toBe('reservations');
    expect(
      (await a.audit.read(session.sessionId)).filter((r) => r.event.type === 'handoff'),
    ).toEqual([]);
  });

  it('should redact card numbers and e-mail addresses from what the model sees', () => {
    const out = redaction().transform(
      { status: 'ok', note: 'card 4111 1111 1111 1111 for ada@example.org' },
      {} as never,
    );
    expect(out.note).toBe('card [card] for [email]');
  });
});
