import { describe, expect, it } from 'vitest';
import { renderSmsBody } from '../../../jobs/notify/http-sms-sender.ts';
import { retryDelayMs } from '../../../jobs/notify/out-of-band-message.ts';

const message = {
  operationId: 'op_01',
  tenantId: 'demo',
  sessionId: 's1',
  caller: '+15550100',
  state: 'COMMITTED',
  text: 'Table for 2 & "more"\nat 20:00',
  reasons: [],
};

describe('when an HTTP SMS template is filled', () => {
  const cases: [
    string,
    'application/json' | 'application/x-www-form-urlencoded',
    string,
    string,
  ][] = [
    [
      'as JSON string content',
      'application/json',
      '{"to":"{to}","text":"{text}","id":"{operation_id}"}',
      '{"to":"+15550100","text":"Table for 2 & \\"more\\"\\nat 20:00","id":"op_01"}',
    ],
    [
      'form-encoded',
      'application/x-www-form-urlencoded',
      'To={to}&Body={text}&Ref={operation_id}',
      'To=%2B15550100&Body=Table%20for%202%20%26%20%22more%22%0Aat%2020%3A00&Ref=op_01',
    ],
    [
      'with every field',
      'application/json',
      '"{tenant_id} {session_id} {state}"',
      '"demo s1 COMMITTED"',
    ],
  ];

  it.each(cases)('should escape each value %s', (_name, contentType, body, expected) => {
    expect(renderSmsBody({ body, contentType }, message)).toBe(expected);
  });
});

describe('when a channel send is retried', () => {
  it('should double the delay from the first one up to the cap, less at most a fifth', () => {
    expect([1, 2, 3, 4, 9, 16].map((n) => retryDelayMs(n, 2_000, 300_000, () => 0))).toEqual([
      2_000, 4_000, 8_000, 16_000, 300_000, 300_000,
    ]);
    expect(retryDelayMs(1, 2_000, 300_000, () => 1)).toBe(1_600);
    const horizonMs = Array.from({ length: 15 }, (_, i) =>
      retryDelayMs(i + 1, 2_000, 300_000, () => 0.5),
    ).reduce((a, b) => a + b, 0);
    expect(horizonMs).toBeGreaterThan(30 * 60_000);
  });
});
