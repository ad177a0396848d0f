import { describe, expect, it } from 'vitest';
import type { DeliveryRecord } from '../../../jobs/ledger/operation.ts';
import { newOperation, testLedger } from '../../support/operations.ts';

const { redis, ledger } = testLedger('ledger-delivery');

/** One record of each stage record-delivery-1.lua ranks (1 duplicate, 2 in progress, 3 final). */
const RECORDS: Record<string, { stage: number; record: DeliveryRecord }> = {
  duplicate: {
    stage: 1,
    record: {
      decision: 'suppress',
      reasons: ['already_told', 'committed'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
  speak_now: {
    stage: 2,
    record: {
      decision: 'speak_now',
      reasons: ['committed'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
  hold: {
    stage: 2,
    record: {
      decision: 'hold',
      reasons: ['goal_changed'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
  reconcile_first: {
    stage: 2,
    record: {
      decision: 'reconcile_first',
      reasons: ['outcome_unknown'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
  out_of_band_decided: {
    stage: 2,
    record: {
      decision: 'deliver_out_of_band',
      reasons: ['caller_hung_up', 'committed'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
  spoken: {
    stage: 3,
    record: {
      decision: 'spoken',
      reasons: ['committed'],
      at: 1,
      channel: 'voice',
      delivered: true,
      responseId: 'resp_1',
    },
  },
  out_of_band_queued: {
    stage: 3,
    record: {
      decision: 'deliver_out_of_band',
      reasons: ['caller_hung_up', 'committed'],
      at: 1,
      channel: 'out_of_band',
      delivered: false,
    },
  },
  out_of_band_delivered: {
    stage: 3,
    record: {
      decision: 'deliver_out_of_band',
      reasons: ['gateway_gone', 'committed'],
      at: 1,
      channel: 'out_of_band',
      delivered: true,
    },
  },
  superseded: {
    stage: 3,
    record: {
      decision: 'suppress',
      reasons: ['superseded_no_effect', 'cancelled'],
      at: 1,
      channel: 'none',
      delivered: false,
    },
  },
};

const pairs = Object.keys(RECORDS).flatMap((current) =>
  Object.keys(RECORDS).map((proposed) => [current, proposed] as const),
);

async function admitted() {
  const spec = newOperation();
  await ledger.admit(spec);
  return spec;
}

describe('when a delivery record is written over another', () => {
  it.each(pairs)('should move forward only: %s, then %s', async (current, proposed) => {
    const from = RECORDS[current];
    const to = RECORDS[proposed];
    if (!from || !to) throw new Error('unknown record');
    const spec = await admitted();
    expect(await ledger.advanceDelivery(spec, from.record)).toEqual({
      written: true,
      current: from.record,
    });
    const forward = to.stage > from.stage || (to.stage === from.stage && to.stage < 3);
    const outcome = await ledger.advanceDelivery(spec, to.record);
    expect(outcome).toEqual({ written: forward, current: forward ? to.record : from.record });
    expect((await ledger.require(spec.tenantId, spec.operationId)).delivery).toEqual(
      forward ? to.record : from.record,
    );
  });

  it('should keep each session of a shared read on its own record', async () => {
    const spec = await admitted();
    await ledger.advanceDelivery(spec, RECORDS.spoken?.record as DeliveryRecord);
    const op = await ledger.require(spec.tenantId, spec.operationId);
    expect(
      await ledger.advanceDelivery(op, RECORDS.speak_now?.record as DeliveryRecord, 'joiner-1'),
    ).toMatchObject({ written: true });
    expect(await ledger.deliveryFor(op, 'joiner-1')).toEqual(RECORDS.speak_now?.record);
    expect((await ledger.require(spec.tenantId, spec.operationId)).delivery).toEqual(
      RECORDS.spoken?.record,
    );
  });

  it('should write nothing for an operation that no longer exists', async () => {
    const gone = newOperation();
    expect(await ledger.advanceDelivery(gone, RECORDS.spoken?.record as DeliveryRecord)).toEqual({
      written: false,
      current: undefined,
    });
    expect(await redis.exists(ledger.keys.operation(gone.tenantId, gone.operationId))).toBe(0);
  });
});
