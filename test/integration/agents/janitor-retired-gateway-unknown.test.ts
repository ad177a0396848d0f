/**
 * Fault: a gateway dies owning a booking that went UNKNOWN (committed, answer lost; lookups keep
 * answering "processing"), and its watch window ends before the booking is reconciled. The
 * janitors must not retire its streams while an operation it owns is still open: when the booking
 * is reconciled after the window, its result lands in a stream a janitor still reads and the
 * caller gets it out of band, once; then the gateway is retired. Real Redis, workers and sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSession } from '../../../agents/agent-session.ts';
import { BOOK, booking } from '../../support/action-harness.ts';
import { startAgentsHarness, type AgentsHarness } from '../../support/agents-harness.ts';
import { waitFor } from '../../support/processes.ts';
import { testRedis } from '../../support/redis.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

const TENANT = 'tenant-retired-unknown';
const DEAD = 'gw-retired-unknown';
/** Past the janitor's watch window of a dead gateway (24 h). */
const DAY_AND_AN_HOUR_MS = 25 * 3_600_000;

let a: AgentsHarness;
const redis = testRedis();
beforeAll(async () => {
  // Without idempotency keys a lost answer is UNKNOWN, reconciled by lookup (never resent blindly).
  a = await startAgentsHarness({
    tenants: { [TENANT]: { book_table: { ...BOOK, providerIdempotent: false } } },
    gatewayId: 'gw-retired-harness',
  });
});
afterAll(async () => {
  redis.disconnect();
  await a.close();
});

describe('when the watch window of a dead gateway ends while an operation it owns is UNKNOWN', () => {
  it('should keep its streams watched until the operation is reconciled, deliver the result once, then retire it', async () => {
    const registry = `${a.h.prefix}:gateways`;
    await a.h.sandbox.addRule({
      fault: 'commit-then-timeout',
      service: 'bookings',
      operation: 'book',
      times: 1,
    });
    await a.h.sandbox.addRule({
      fault: 'lookup=processing',
      service: 'bookings',
      operation: 'lookup',
    });
    const session = new AgentSession({
      sessionId: 'retired-unknown-call',
      tenantId: TENANT,
      caller: '+15550133',
      ownerGateway: DEAD,
      agent: 'reservations',
    });
    const out = await a.runtime.handle(session, {
      callId: 'c-ru',
      name: 'book_table',
      arguments: {
        ...booking(),
        restaurant: 'bistro-nord',
        time: '19:00',
        party_size: 2,
        name: 'Lin',
      },
    });
    const id = String(out.operation_id);
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, id))?.state === 'UNKNOWN' ? true : undefined,
      10_000,
      'the booking UNKNOWN',
    );

    // The gateway died; a janitor takes its UNKNOWN event (nothing to tell before reconciliation).
    await redis.zadd(registry, Date.now() - 5_000, DEAD);
    expect(await a.janitor('gw-retired-live').sweep()).toBe(1);
    // Its watch window ends: nothing is owed in its stream, but the booking it owns is still open.
    await redis.zadd(registry, Date.now() - DAY_AND_AN_HOUR_MS, DEAD);
    await a.janitor('gw-retired-live').sweep();
    expect(await redis.zscore(registry, DEAD)).not.toBeNull();
    expect((await a.h.layer.ledger.get(TENANT, id))?.state).toBe('UNKNOWN');

    // The provider answers lookups again: reconciled after the window.
    await fetch(`${a.h.sandbox.url}/admin/faults`, { method: 'DELETE' });
    await waitFor(
      async () =>
        (await a.h.layer.ledger.get(TENANT, id))?.state === 'COMMITTED' ? true : undefined,
      10_000,
      'the booking reconciled',
    );
    await waitFor(
      async () => ((await a.janitor('gw-retired-live').sweep()) > 0 ? true : undefined),
      5_000,
      'a janitor delivering the result',
    );
    expect(await messagesOnceSettled(a.h.sandbox.url, id, { settleMs: 500 })).toEqual([
      expect.objectContaining({ deliveries: 1 }),
    ]);
    expect((await a.h.layer.ledger.get(TENANT, id))?.delivery).toMatchObject({
      decision: 'deliver_out_of_band',
      reasons: expect.arrayContaining(['gateway_gone', 'committed']) as unknown,
    });

    // Nothing open, nothing owed: the next round retires it.
    await a.janitor('gw-retired-live').sweep();
    expect(await redis.zscore(registry, DEAD)).toBeNull();
    expect(await redis.exists(a.delivery.streamKey(TENANT, DEAD))).toBe(0);
    expect(await messagesOnceSettled(a.h.sandbox.url, id, { settleMs: 0 })).toHaveLength(1);
  });
});
