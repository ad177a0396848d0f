import { describe, expect, it } from 'vitest';
import { configSchema } from '../../../config/schema.ts';

describe('when the privacy section is left out', () => {
  it('should keep call records and timelines for 7 days and audit trails for 30, unmasked', () => {
    expect(configSchema.parse({}).privacy).toEqual({
      maskCallerNumbers: false,
      callRecordsTtlSeconds: 7 * 86_400,
      timelineTtlSeconds: 7 * 86_400,
      auditTtlSeconds: 30 * 86_400,
    });
  });
});

describe('when the privacy section is given', () => {
  it('should take its settings and leave the ledger retention alone', () => {
    const config = configSchema.parse({
      privacy: { maskCallerNumbers: true, callRecordsTtlSeconds: 3_600, timelineTtlSeconds: 60 },
    });
    expect(config.privacy).toMatchObject({
      maskCallerNumbers: true,
      callRecordsTtlSeconds: 3_600,
      timelineTtlSeconds: 60,
    });
    expect(config.ledger.retentionDays).toBe(30);
  });

  it.each([
    ['a retention of zero', { timelineTtlSeconds: 0 }],
    ['a retention that is not whole seconds', { callRecordsTtlSeconds: 1.5 }],
    ['an unknown setting', { keepForever: true }],
  ])('should refuse %s', (_, privacy) => {
    expect(configSchema.safeParse({ privacy }).success).toBe(false);
  });
});
