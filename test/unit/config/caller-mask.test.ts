import { describe, expect, it } from 'vitest';
import { isCallerField, maskCaller, maskCallerFields } from '../../../config/caller-mask.ts';

describe('when a caller number is masked for display', () => {
  it.each([
    [
      'a full international number keeps its first four and last two digits',
      '+34671234512',
      '+3467****12',
    ],
    ['a national number of ten digits keeps its prefix and tail', '0612345678', '0612****78'],
    [
      'a long number hides every middle digit behind a fixed mask',
      '+4915112345678901',
      '+4915****01',
    ],
    ['a number with separators is read by its digits', '+34 671 23 45 12', '+3467****12'],
    ['a short subscriber number keeps only its last two digits', '5551234', '****34'],
    ['six digits keep the last two', '123456', '****56'],
    ['an extension is hidden whole', '1000', '****'],
    ['a two-digit number is hidden whole', '42', '****'],
    ['a SIP user name is hidden whole', 'alice', '****'],
    ['a word that is not a number is hidden whole', 'anonymous', '****'],
    ['digits mixed with letters are not a number', '+3467abc4512', '****'],
    ['an empty caller stays empty', '', ''],
  ])('%s', (_, input, shown) => {
    expect(maskCaller(input)).toBe(shown);
  });

  it.each([
    [
      'a SIP URI keeps its host',
      'sip:+34671234512@trunk.example.com',
      'sip:+3467****12@trunk.example.com',
    ],
    [
      'a sips URI with parameters',
      'sips:+34671234512@pbx;user=phone',
      'sips:+3467****12@pbx;user=phone',
    ],
    ['a tel URI', 'tel:+34671234512', 'tel:+3467****12'],
    ['a SIP URI of a named user', 'sip:alice@example.com', 'sip:****@example.com'],
    [
      'a name-addr hides its display name',
      '"Alice Smith" <sip:+34671234512@trunk>;tag=1',
      '"****" <sip:+3467****12@trunk>;tag=1',
    ],
  ])('should mask only the user part of %s', (_, input, shown) => {
    expect(maskCaller(input)).toBe(shown);
  });

  it('should never show more than the last two digits of any number below ten digits', () => {
    for (let length = 1; length < 10; length += 1) {
      const shown = maskCaller('123456789'.slice(0, length));
      expect(shown.replace(/\D/g, '').length).toBeLessThanOrEqual(2);
    }
  });
});

describe('when caller fields are masked in a value', () => {
  it('should recognise the caller field names and nothing else', () => {
    for (const name of [
      'caller',
      'Caller',
      'caller_number',
      'callerNumber',
      'caller_id',
      'caller-uri',
    ])
      expect(isCallerField(name)).toBe(true);
    for (const name of ['called_number', 'caller_verified', 'callerVerified', 'recaller', 'from'])
      expect(isCallerField(name)).toBe(false);
  });

  it('should mask caller fields at any depth and leave everything else as it was', () => {
    const view = {
      call: { caller: '+34671234512', called_number: '+34910000000', agent: 'host' },
      recent: [{ caller: 'sip:5551234@pbx', state: 'ended' }],
      timeline: [{ detail: { args: { callerNumber: '0612345678', party: 4 } } }],
    };
    expect(maskCallerFields(view)).toEqual({
      call: { caller: '+3467****12', called_number: '+34910000000', agent: 'host' },
      recent: [{ caller: 'sip:****34@pbx', state: 'ended' }],
      timeline: [{ detail: { args: { callerNumber: '0612****78', party: 4 } } }],
    });
    expect(view.call.caller).toBe('+34671234512');
  });
});
