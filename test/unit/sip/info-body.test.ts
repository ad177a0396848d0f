/**
 * The one reading of SIP INFO bodies both drivers answer from: DTMF digits in
 * application/dtmf-relay and application/dtmf, other content passed on, and hostile bodies
 * refused (400) without a crash or a slow scan.
 */
import { describe, expect, it } from 'vitest';
import {
  MAX_DTMF_BODY_BYTES,
  parseInfoBody,
  type InfoBody,
} from '../../../gateway/sip/info-body.ts';

const RELAY = 'application/dtmf-relay';

describe('when an INFO carries application/dtmf-relay', () => {
  it.each<[string, string, InfoBody]>([
    [
      'a digit and a duration',
      'Signal=5\r\nDuration=160\r\n',
      { type: 'dtmf', digit: '5', durationMs: 160 },
    ],
    ['a digit alone', 'Signal=#', { type: 'dtmf', digit: '#' }],
    [
      'lower-case keys, spaces and a lower-case letter',
      ' signal = a \n duration = 250 \n',
      { type: 'dtmf', digit: 'A', durationMs: 250 },
    ],
    ['the star', 'Signal=*\r\nDuration=100', { type: 'dtmf', digit: '*', durationMs: 100 }],
    [
      'an RFC 4733 event code for #',
      'Signal=11\r\nDuration=100',
      { type: 'dtmf', digit: '#', durationMs: 100 },
    ],
    ['an RFC 4733 event code for D', 'Signal=15', { type: 'dtmf', digit: 'D' }],
    [
      'Duration before Signal and an extra field',
      'Duration=80\r\nVolume=10\r\nSignal=0\r\n',
      { type: 'dtmf', digit: '0', durationMs: 80 },
    ],
    [
      'a duration of zero (reported without it)',
      'Signal=1\r\nDuration=0',
      { type: 'dtmf', digit: '1' },
    ],
    [
      'a duration that is not a number (reported without it)',
      'Signal=1\r\nDuration=-5',
      { type: 'dtmf', digit: '1' },
    ],
    [
      'an absurd duration (reported without it)',
      'Signal=1\r\nDuration=99999999999999999999999',
      { type: 'dtmf', digit: '1' },
    ],
    [
      'a duration over a minute (reported without it)',
      'Signal=1\r\nDuration=600000',
      { type: 'dtmf', digit: '1' },
    ],
    ['parameters on the content type', 'Signal=9', { type: 'dtmf', digit: '9' }],
  ])('should read %s', (_what, body, expected) => {
    expect(parseInfoBody(`${RELAY}; charset=utf-8`, body)).toEqual(expected);
  });

  it.each<[string, string]>([
    ['an empty body', ''],
    ['no Signal line', 'Duration=160'],
    ['an empty Signal', 'Signal=\r\nDuration=160'],
    ['a letter outside A-D', 'Signal=Z'],
    ['two characters', 'Signal=12345'],
    ['the flash event code 16', 'Signal=16'],
    ['two Signal lines', 'Signal=1\r\nSignal=2'],
    ['two Duration lines', 'Signal=1\r\nDuration=1\r\nDuration=2'],
    ['a line without =', 'Signal=1\r\ngarbage'],
    ['a NUL byte in the digit', 'Signal=5\u0000'],
    ['a unicode digit', 'Signal=\u0665'],
    ['a body longer than any real one', `Signal=1\r\n${'X=1\r\n'.repeat(100)}`],
  ])('should refuse %s', (_what, body) => {
    expect(parseInfoBody(RELAY, body).type).toBe('invalid');
  });
});

describe('when an INFO carries application/dtmf', () => {
  it.each<[string, InfoBody]>([
    ['7', { type: 'dtmf', digit: '7' }],
    [' b\r\n', { type: 'dtmf', digit: 'B' }],
    ['#', { type: 'dtmf', digit: '#' }],
    ['10', { type: 'dtmf', digit: '*' }],
  ])('should read %j', (body, expected) => {
    expect(parseInfoBody('Application/DTMF', body)).toEqual(expected);
  });

  it.each(['', '77', 'Signal=7', 'x', '\u0000', ' '.repeat(MAX_DTMF_BODY_BYTES + 1)])(
    'should refuse %j',
    (body) => {
      expect(parseInfoBody('application/dtmf', body).type).toBe('invalid');
    },
  );
});

describe('when an INFO carries anything else', () => {
  it('should pass the media type without parameters and the body as they came', () => {
    expect(parseInfoBody('Application/X-Custom; charset=utf-8', 'hello')).toEqual({
      type: 'info',
      contentType: 'application/x-custom',
      body: 'hello',
    });
    expect(parseInfoBody('', '')).toEqual({ type: 'info', contentType: '', body: '' });
  });
});

describe('when the body is hostile', () => {
  it('should read 50,000 generated bodies without throwing, and only ever report a single valid digit', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const alphabet = [
      'Signal',
      'Duration',
      '=',
      '\r\n',
      '\n',
      ' ',
      '\t',
      '5',
      '#',
      '*',
      'A',
      'z',
      '\u0000',
      '1',
      '0',
      ';',
      '\u00ff',
      'signal=',
    ];
    for (let i = 0; i < 50_000; i++) {
      const parts: string[] = [];
      const length = Math.floor(random() * 12);
      for (let p = 0; p < length; p++)
        parts.push(alphabet[Math.floor(random() * alphabet.length)] ?? '');
      const result = parseInfoBody(i % 2 === 0 ? RELAY : 'application/dtmf', parts.join(''));
      if (result.type === 'dtmf') expect(result.digit).toMatch(/^[0-9*#A-D]$/);
      else expect(result.type).toBe('invalid');
    }
  });

  it('should refuse a body of 60,000 newlines and spaces at once (no backtracking scan)', () => {
    const started = performance.now();
    expect(parseInfoBody(RELAY, ' \n'.repeat(30_000)).type).toBe('invalid');
    expect(performance.now() - started).toBeLessThan(50);
  });
});
