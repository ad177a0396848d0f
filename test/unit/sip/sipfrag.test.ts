import { describe, expect, it } from 'vitest';
import { sipfragProgress } from '../../../gateway/sip/sipfrag.ts';

describe('when a REFER NOTIFY carries a sipfrag body', () => {
  it.each([
    ['SIP/2.0 100 Trying\r\n', { state: 'trying', status: 100 }],
    ['SIP/2.0 180 Ringing\r\n', { state: 'ringing', status: 180 }],
    ['SIP/2.0 183 Session Progress', { state: 'ringing', status: 183 }],
    ['SIP/2.0 200 OK\r\nContent-Length: 0\r\n', { state: 'succeeded', status: 200 }],
    ['SIP/2.0 486 Busy Here\r\n', { state: 'failed', status: 486, reason: 'Busy Here' }],
    ['SIP/2.0 603\r\n', { state: 'failed', status: 603, reason: '' }],
    ['junk\r\nSIP/2.0 404 Not Found\r\n', { state: 'failed', status: 404, reason: 'Not Found' }],
  ])('should read %j', (body, expected) => {
    expect(sipfragProgress(body)).toEqual(expected);
  });

  it.each([['', 'SIP/2.0 2000 OK', 'HTTP/1.1 200 OK', 'sip/2.0 200 ok']])(
    'should ignore a body that is not a status line: %j',
    (body) => {
      expect(sipfragProgress(body)).toBeUndefined();
    },
  );

  it('should read only the start of a hostile body, quickly', () => {
    const started = performance.now();
    expect(sipfragProgress(`${'\r\n'.repeat(500_000)}SIP/2.0 200 OK`)).toBeUndefined();
    const long = sipfragProgress(`SIP/2.0 487 ${'x'.repeat(1_000_000)}`);
    expect(long).toMatchObject({ state: 'failed', status: 487 });
    expect(long?.state === 'failed' && long.reason.length).toBeLessThan(1_024);
    expect(performance.now() - started).toBeLessThan(500);
  });
});
