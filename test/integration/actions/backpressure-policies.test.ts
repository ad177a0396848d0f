import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import {
  AVAILABILITY,
  BOOK,
  booking,
  startHarness,
  type Harness,
} from '../../support/action-harness.ts';

let h: Harness;

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))
    .reduce((sum, v) => sum + v.value, 0);
}

beforeAll(async () => {
  h = await startHarness({
    tenants: {
      'tenant-reject': { book_table: { ...BOOK, policy: 'reject', maxConcurrent: 2 } },
      'tenant-queue': {
        book_table: {
          ...BOOK,
          policy: 'queue',
          maxConcurrent: 1,
          maxQueued: 2,
          admissionDeadlineMs: 400,
        },
      },
      'tenant-coalesce': { check_availability: { ...AVAILABILITY } },
      'tenant-degrade': {
        check_availability: {
          ...AVAILABILITY,
          policy: 'degrade',
          maxConcurrent: 1,
          maxQueued: 0,
          fallback: 'Tables are usually free before 20:00.',
        },
      },
    },
  });
  // Every provider call takes a while, so requests pile up.
  for (const tenant of ['tenant-reject', 'tenant-queue', 'tenant-degrade'])
    await h.sandbox.addRule({ fault: 'latency=700', tenant });
  await h.sandbox.addRule({ fault: 'latency=300', tenant: 'tenant-coalesce' });
});
afterAll(async () => h.close());

describe('when the reject policy is full', () => {
  it('should answer busy at once and admit nothing beyond maxConcurrent', async () => {
    const decisions = await Promise.all(
      Array.from({ length: 4 }, () =>
        h.layer.admit({
          tenantId: 'tenant-reject',
          action: 'book_table',
          args: booking(),
          scope: h.scope(),
        }),
      ),
    );
    expect(decisions.filter((d) => d.type === 'started')).toHaveLength(2);
    expect(decisions.filter((d) => d.type === 'busy')).toEqual([
      expect.objectContaining({ type: 'busy', reason: 'at_capacity' }),
      expect.objectContaining({ type: 'busy', reason: 'at_capacity' }),
    ]);
    expect(
      await metric('callgate_admission_decisions_total', {
        tenant: 'tenant-reject',
        outcome: 'busy_at_capacity',
      }),
    ).toBe(2);
  });
});

describe('when the queue policy is used', () => {
  it('should bound the queue, and cancel a queued operation whose admission deadline passed without calling the provider', async () => {
    const decisions = [];
    for (let i = 0; i < 4; i++)
      decisions.push(
        await h.layer.admit({
          tenantId: 'tenant-queue',
          action: 'book_table',
          args: booking(),
          scope: h.scope(),
        }),
      );
    // 1 running + 2 queued fit; the fourth is refused.
    expect(decisions.map((d) => d.type)).toEqual(['started', 'started', 'started', 'busy']);
    expect(decisions[1]).toMatchObject({ queued: true });
    expect(decisions[3]).toMatchObject({ reason: 'queue_full' });
    const ids = decisions.flatMap((d) => (d.type === 'started' ? [d.operationId] : []));
    const ops = await Promise.all(ids.map((id) => h.layer.waitFor('tenant-queue', id, 10_000)));
    // The first runs (700 ms at the provider); the queued ones wait past their 400 ms admission deadline.
    expect(ops[0]?.state).toBe('COMMITTED');
    expect(ops.slice(1).map((o) => o?.state)).toEqual(['CANCELLED', 'CANCELLED']);
    for (const op of ops.slice(1)) {
      expect(
        (await h.layer.ledger.history('tenant-queue', op?.operationId ?? '')).at(-1),
      ).toMatchObject({ state: 'CANCELLED', reason: 'admission_deadline_passed' });
      expect((await h.sandbox.counts()).requests[op?.operationId ?? '']).toBeUndefined();
    }
  });
});

describe('when identical reads arrive together under the coalesce policy', () => {
  it('should make one provider call and give all ten requesters its result', async () => {
    const args = { restaurant: 'sushi-kaito', date: '2033-05-05', party_size: 2 };
    const decisions = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        h.layer.admit({
          tenantId: 'tenant-coalesce',
          action: 'check_availability',
          args,
          scope: h.scope({ sessionId: `caller-${i}` }),
        }),
      ),
    );
    expect(decisions.filter((d) => d.type === 'started')).toHaveLength(1);
    expect(decisions.filter((d) => d.type === 'coalesced')).toHaveLength(9);
    const ids = new Set(decisions.map((d) => ('operationId' in d ? d.operationId : '')));
    expect(ids.size).toBe(1);
    const results = await Promise.all(
      decisions.map((d) =>
        h.layer.waitFor('tenant-coalesce', 'operationId' in d ? d.operationId : '', 10_000),
      ),
    );
    for (const op of results) expect(op?.result).toHaveProperty('slots');
    const counts = await h.sandbox.counts();
    expect(counts.requests[[...ids][0] ?? '']).toBe(1);
    // Once finished, a new identical read is a new operation (no stale cached answer).
    const later = await h.layer.admit({
      tenantId: 'tenant-coalesce',
      action: 'check_availability',
      args,
      scope: h.scope(),
    });
    expect(later.type).toBe('started');
  });
});

describe('when the degrade policy has no room', () => {
  it('should answer with the declared fallback and count it', async () => {
    const first = await h.layer.admit({
      tenantId: 'tenant-degrade',
      action: 'check_availability',
      args: { restaurant: 'bistro-nord', date: '2033-01-01' },
      scope: h.scope(),
    });
    const second = await h.layer.admit({
      tenantId: 'tenant-degrade',
      action: 'check_availability',
      args: { restaurant: 'bistro-nord', date: '2033-01-02' },
      scope: h.scope(),
    });
    expect(first.type).toBe('started');
    expect(second).toEqual({ type: 'degraded', fallback: 'Tables are usually free before 20:00.' });
    expect(
      await metric('callgate_admission_decisions_total', {
        tenant: 'tenant-degrade',
        outcome: 'degraded',
      }),
    ).toBe(1);
  });
});

describe('when the metrics are scraped while operations wait and run', () => {
  it('should report per action how many are active and how many hold a lease, against the limit', async () => {
    await h.sandbox.addRule({ fault: 'latency=600', tenant: 'tenant-queue', operation: 'book' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await h.layer.admit({
        tenantId: 'tenant-queue',
        action: 'book_table',
        args: booking(),
        scope: h.scope(),
      });
      if (d.type === 'started') ids.push(d.operationId);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    await h.layer.refreshMetrics();
    expect(
      await metric('callgate_action_active_operations', {
        tenant: 'tenant-queue',
        action: 'book_table',
      }),
    ).toBe(3);
    expect(
      await metric('callgate_action_leases_in_use', {
        tenant: 'tenant-queue',
        action: 'book_table',
      }),
    ).toBe(1);
    expect(
      await metric('callgate_action_max_concurrent', {
        tenant: 'tenant-queue',
        action: 'book_table',
      }),
    ).toBe(1);
    await Promise.all(ids.map((id) => h.layer.waitFor('tenant-queue', id, 10_000)));
    await h.layer.refreshMetrics();
    expect(
      await metric('callgate_action_active_operations', {
        tenant: 'tenant-queue',
        action: 'book_table',
      }),
    ).toBe(0);
  });
});
