/**
 * The call context sent to HTTP systems of record: present values become headers, absent or
 * implausible ones leave their header out, and nothing can split the request.
 */
import { describe, expect, it } from 'vitest';
import {
  CALLED_HEADER,
  CALLER_HEADER,
  CALLER_VERIFIED_HEADER,
  callHeaders,
  SESSION_ID_HEADER,
} from '../../../jobs/providers/call-headers.ts';

describe('when the call context becomes provider headers', () => {
  it('should send the caller, whether it is verified, the called number and the session', () => {
    expect(
      callHeaders({
        caller: '+15550123',
        callerVerified: true,
        called: '+15550100',
        sessionId: 'ses_01J9Z',
      }),
    ).toEqual({
      [CALLER_HEADER]: '+15550123',
      [CALLER_VERIFIED_HEADER]: 'true',
      [CALLED_HEADER]: '+15550100',
      [SESSION_ID_HEADER]: 'ses_01J9Z',
    });
  });

  it('should say false for a caller not verified, also when the record predates the flag', () => {
    expect(callHeaders({ caller: 'alice' })[CALLER_VERIFIED_HEADER]).toBe('false');
    expect(callHeaders({ caller: 'alice', callerVerified: false })[CALLER_VERIFIED_HEADER]).toBe(
      'false',
    );
  });

  it('should leave out every header whose value is absent', () => {
    expect(callHeaders(undefined)).toEqual({});
    expect(callHeaders({})).toEqual({});
    expect(callHeaders({ callerVerified: true, sessionId: '' })).toEqual({});
  });

  it.each([
    ['a CR LF', '+1555\r\nX-Evil: yes'],
    ['a lone LF', 'alice\nbob'],
    ['a NUL', 'a\u0000b'],
    ['white space', 'Alice Smith'],
    ['a quote', '"alice"'],
    ['angle brackets', '<sip:alice@trunk>'],
    ['a colon', 'sip:trunk.example'],
    ['an at sign', 'alice@trunk'],
    ['non-ASCII text', 'zoë'],
    ['only punctuation', '+-.'],
    ['the empty string', ''],
    ['more than 128 characters', '1'.repeat(129)],
  ])('should drop a caller or called number with %s', (_what, value) => {
    expect(callHeaders({ caller: value, callerVerified: true, called: value })).toEqual({});
  });

  it.each(['+15550123', '555-0123', '*21#', 'alice', '+15550123;isub=1', 'anonymous'])(
    'should keep the plausible caller %s',
    (caller) => {
      expect(callHeaders({ caller })[CALLER_HEADER]).toBe(caller);
    },
  );

  it('should drop a session id that is not one admission accepts', () => {
    expect(callHeaders({ sessionId: 'a b' })).toEqual({});
    expect(callHeaders({ sessionId: 'ses\r\n' })).toEqual({});
  });
});
