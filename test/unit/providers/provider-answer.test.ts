import { describe, expect, it } from 'vitest';
import {
  cancelAnswer,
  executeAnswer,
  lookupAnswer,
} from '../../../jobs/providers/provider-answer.ts';
import { ProviderOutcomeUnknownError } from '../../../jobs/providers/provider.ts';

const answer = (status: number, body: unknown) => ({
  status,
  text: typeof body === 'string' ? body : JSON.stringify(body),
});

describe('when an execute answer is classified', () => {
  it.each([
    [
      200,
      { result: { id: 1 }, provider_ref: 'r1' },
      { status: 'ok', result: { id: 1 }, providerRef: 'r1' },
    ],
    [
      201,
      { id: 'x', done: true },
      { status: 'ok', result: { id: 'x', done: true }, providerRef: 'x' },
    ],
    [
      400,
      { error: { code: 'bad', message: 'no' } },
      { status: 'failed', retryable: false, code: 'bad', message: 'no' },
    ],
    [
      422,
      { code: 'slot_taken', message: 'taken' },
      { status: 'failed', retryable: false, code: 'slot_taken', message: 'taken' },
    ],
    [
      409,
      { error: 'busy' },
      {
        status: 'failed',
        retryable: true,
        code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
        message: 'busy',
      },
    ],
    [
      429,
      {},
      {
        status: 'failed',
        retryable: true,
        code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
        message: 'provider p is unavailable (status 429)',
      },
    ],
    [
      503,
      { error: { code: 'maintenance', message: 'back at 6' } },
      { status: 'failed', retryable: true, code: 'maintenance', message: 'back at 6' },
    ],
    [
      501,
      '',
      {
        status: 'failed',
        retryable: true,
        code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE',
        message: 'provider p is unavailable (status 501)',
      },
    ],
    [
      403,
      '',
      {
        status: 'failed',
        retryable: false,
        code: 'CALLGATE_ERR_PROVIDER_REJECTED',
        message: 'provider p refused the request: status 403',
      },
    ],
    [
      302,
      '',
      {
        status: 'failed',
        retryable: false,
        code: 'CALLGATE_ERR_PROVIDER_BAD_RESPONSE',
        message: 'provider p answered with something unreadable: unexpected status 302',
      },
    ],
  ])('should map status %i with %j', (status, body, expected) => {
    expect(executeAnswer('p', answer(status, body))).toEqual(expected);
  });

  it.each([['not json'], ['[1,2]'], ['"text"'], ['']])(
    'should throw outcome unknown for a 2xx body %j',
    (text) => {
      expect(() => executeAnswer('p', { status: 200, text })).toThrow(ProviderOutcomeUnknownError);
    },
  );

  // The request may have been acted on before the 5xx: a resend could be a second refund.
  it.each([
    [500, { error: { code: 'internal', message: 'oops' } }],
    [500, ''],
    [502, '<html>Bad Gateway</html>'],
    [504, 'upstream request timeout'],
    [504, { error: { code: 'timeout', message: 'upstream' } }],
    [503, 'upstream connect error or disconnect/reset before headers'],
    [503, { message: 'no healthy upstream' }],
    [503, ''],
    [507, {}],
    [599, {}],
  ])(
    'should throw outcome unknown for status %i with %j, not claim a definite failure',
    (status, body) => {
      const thrown: unknown = (() => {
        try {
          return executeAnswer('p', answer(status, body));
        } catch (error) {
          return error;
        }
      })();
      expect(thrown).toBeInstanceOf(ProviderOutcomeUnknownError);
      expect((thrown as Error).cause).toMatchObject({ code: 'CALLGATE_ERR_PROVIDER_UNAVAILABLE' });
    },
  );
});

describe('when a lookup answer is classified', () => {
  it.each([
    [
      200,
      { status: 'committed', result: { a: 1 }, provider_ref: 'r' },
      { status: 'committed', result: { a: 1 }, providerRef: 'r' },
    ],
    [200, { status: 'committed' }, { status: 'committed', result: {} }],
    [
      200,
      { status: 'failed', error: { code: 'c', message: 'm' } },
      { status: 'failed', code: 'c', message: 'm' },
    ],
    [200, { status: 'cancelled' }, { status: 'cancelled' }],
    [200, { status: 'not_found' }, { status: 'not_found' }],
    [404, 'nothing', { status: 'not_found' }],
    [
      200,
      { status: 'processing' },
      {
        status: 'unknown',
        reason: 'the provider is still processing the request',
        processing: true,
      },
    ],
    [
      200,
      { status: 'weird' },
      { status: 'unknown', reason: 'lookup answered an unknown status weird' },
    ],
    [200, 'garbage', { status: 'unknown', reason: 'lookup answer is not a JSON object' }],
    [500, {}, { status: 'unknown', reason: 'lookup answered status 500' }],
  ])('should map status %i with %j', (status, body, expected) => {
    expect(lookupAnswer(answer(status, body))).toEqual(expected);
  });
});

describe('when a cancel answer is classified', () => {
  it.each([
    [200, { status: 'cancelled' }, { status: 'cancelled' }],
    [
      200,
      { status: 'already_committed', result: { a: 1 } },
      { status: 'already_committed', result: { a: 1 } },
    ],
    [202, { status: 'pending' }, { status: 'pending' }],
    [501, '', { status: 'not_supported' }],
    [405, {}, { status: 'not_supported' }],
  ])('should map status %i with %j', (status, body, expected) => {
    expect(cancelAnswer('p', answer(status, body))).toEqual(expected);
  });

  it.each([
    [500, {}],
    [404, {}],
    [200, 'garbage'],
    [200, { status: 'odd' }],
  ])('should throw outcome unknown for status %i with %j', (status, body) => {
    expect(() => cancelAnswer('p', answer(status, body))).toThrow(ProviderOutcomeUnknownError);
  });
});
