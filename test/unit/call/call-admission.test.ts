import { describe, expect, it } from 'vitest';
import {
  admitCall,
  refusalHeaders,
  slotsAvailable,
  type AdmissionLimits,
  type AdmissionLoad,
} from '../../../gateway/call/call-admission.ts';

const LIMITS: AdmissionLimits = {
  maxCalls: 200,
  tenantMaxCalls: 10,
  maxEventLoopDelayMs: 200,
  retryAfterSeconds: 5,
};
const IDLE: AdmissionLoad = {
  gatewayCalls: 0,
  tenantCalls: 0,
  eventLoopDelayMs: 0,
  draining: false,
};

describe('call admission', () => {
  it.each<[string, Partial<AdmissionLimits>, Partial<AdmissionLoad>, unknown]>([
    ['an idle gateway', {}, {}, { admit: true }],
    ['one slot left', {}, { gatewayCalls: 199, tenantCalls: 9 }, { admit: true }],
    [
      'a full gateway (calls being set up count)',
      {},
      { gatewayCalls: 200 },
      { admit: false, reason: 'gateway_full', status: 503, retryAfterSeconds: 5 },
    ],
    [
      'a gateway over its limit after a reload lowered it',
      { maxCalls: 50 },
      { gatewayCalls: 80 },
      { admit: false, reason: 'gateway_full', status: 503 },
    ],
    [
      'a tenant at its limit',
      {},
      { gatewayCalls: 10, tenantCalls: 10 },
      { admit: false, reason: 'tenant_full', status: 486, phrase: 'Busy Here' },
    ],
    [
      'a tenant without a limit',
      { tenantMaxCalls: undefined },
      { tenantCalls: 150 },
      { admit: true },
    ],
    [
      'a late event loop',
      {},
      { eventLoopDelayMs: 201 },
      { admit: false, reason: 'overloaded', status: 503, retryAfterSeconds: 5 },
    ],
    ['a loop exactly at the threshold', {}, { eventLoopDelayMs: 200 }, { admit: true }],
    [
      'a draining gateway',
      {},
      { draining: true },
      { admit: false, reason: 'draining', status: 503, retryAfterSeconds: 5 },
    ],
    [
      'a full gateway whose tenant is also full: the gateway answers first (503, try elsewhere)',
      {},
      { gatewayCalls: 200, tenantCalls: 10 },
      { admit: false, reason: 'gateway_full', status: 503 },
    ],
    [
      'a draining, late, full gateway: draining first',
      {},
      { draining: true, eventLoopDelayMs: 500, gatewayCalls: 200 },
      { admit: false, reason: 'draining' },
    ],
    [
      'a late loop on a full gateway: overloaded first',
      {},
      { eventLoopDelayMs: 500, gatewayCalls: 200 },
      { admit: false, reason: 'overloaded' },
    ],
  ])('should decide for %s', (_name, limits, load, expected) => {
    expect(admitCall({ ...LIMITS, ...limits }, { ...IDLE, ...load })).toMatchObject(
      expected as object,
    );
  });

  it('should send Retry-After with every 503 and none with 486', () => {
    expect(refusalHeaders(admitCall(LIMITS, { ...IDLE, gatewayCalls: 200 }))).toEqual([
      { name: 'Retry-After', value: '5' },
    ]);
    expect(refusalHeaders(admitCall(LIMITS, { ...IDLE, draining: true }))).toEqual([
      { name: 'Retry-After', value: '5' },
    ]);
    const busy = admitCall(LIMITS, { ...IDLE, tenantCalls: 10 });
    expect(busy).not.toHaveProperty('retryAfterSeconds');
    expect(refusalHeaders(busy)).toEqual([]);
    expect(refusalHeaders(admitCall(LIMITS, IDLE))).toEqual([]);
  });

  it.each([
    [200, 0, 200],
    [200, 199, 1],
    [200, 200, 0],
    [200, 250, 0],
  ])('should count %i - %i calls as %i free slots', (max, calls, slots) => {
    expect(slotsAvailable(max, calls)).toBe(slots);
  });
});
