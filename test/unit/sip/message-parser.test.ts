import { describe, expect, it } from 'vitest';
import { headerValue, headerValues } from '../../../gateway/sip/header-names.ts';
import {
  parseNameAddr,
  parseUri,
  parseVia,
  paramValue,
} from '../../../gateway/sip/header-parser.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import type { SipMessage, SipRequest, SipResponse } from '../../../gateway/sip/message-types.ts';

const crlf = (lines: string[]): string => lines.join('\r\n');

const INVITE = crlf([
  'INVITE sip:+15551234567@gw.example.com;transport=udp SIP/2.0',
  'Via: SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK776asdhds;rport',
  'Max-Forwards: 70',
  'To: <sip:+15551234567@gw.example.com>',
  'From: "Alice Smith" <sip:alice@example.com>;tag=1928301774',
  'Call-ID: a84b4c76e66710@pc33.example.com',
  'CSeq: 314159 INVITE',
  'Contact: <sip:alice@10.0.0.1:5070>',
  'Content-Type: application/sdp',
  'Content-Length: 4',
  '',
  'v=0\r\n',
]);

function request(text: string | Buffer): SipRequest {
  const result = parseSipMessage(text);
  if (!result.ok) throw new Error(result.reason);
  if (result.value.kind !== 'request') throw new Error('not a request');
  return result.value;
}

function response(text: string): SipResponse {
  const result = parseSipMessage(text);
  if (!result.ok) throw new Error(result.reason);
  if (result.value.kind !== 'response') throw new Error('not a response');
  return result.value;
}

describe('when parsing a well-formed INVITE', () => {
  const message = request(INVITE);

  it('should read the request line, the URI user and its parameters', () => {
    expect(message.method).toBe('INVITE');
    expect(message.uri).toMatchObject({
      scheme: 'sip',
      user: '+15551234567',
      host: 'gw.example.com',
    });
    expect(message.uri.params).toEqual([['transport', 'udp']]);
  });

  it('should read Via with branch and an rport flag', () => {
    expect(message.via).toHaveLength(1);
    expect(message.via[0]).toMatchObject({
      transport: 'UDP',
      host: '10.0.0.1',
      port: 5070,
      branch: 'z9hG4bK776asdhds',
      rport: true,
    });
  });

  it('should read From with display name and tag, To without tag, Call-ID, CSeq and Max-Forwards', () => {
    expect(message.from.displayName).toBe('Alice Smith');
    expect(paramValue(message.from.params, 'tag')).toBe('1928301774');
    expect(paramValue(message.to.params, 'tag')).toBeUndefined();
    expect(message.callId).toBe('a84b4c76e66710@pc33.example.com');
    expect(message.cseq).toEqual({ seq: 314159, method: 'INVITE' });
    expect(message.maxForwards).toBe(70);
  });

  it('should frame the body by Content-Length', () => {
    expect(message.body).toBe('v=0\r');
  });
});

describe('when header names are compact or oddly cased', () => {
  const text = crlf([
    'OPTIONS sip:gw.example.com SIP/2.0',
    'v: SIP/2.0/TCP 10.0.0.2;branch=z9hG4bKa',
    'mAX-fORWARDS: 10',
    't: sip:gw.example.com',
    'f: <sip:bob@example.com>;tag=x',
    'i: abc',
    'CSEQ: 2 OPTIONS',
    'm: <sip:bob@10.0.0.2>',
    'k: timer, replaces',
    's: hello',
    'l: 0',
    '',
    '',
  ]);

  it('should expand i m f t v l c k s to their long names', () => {
    const message = request(text);
    expect(message.callId).toBe('abc');
    expect(headerValue(message.headers, 'Contact')).toBe('<sip:bob@10.0.0.2>');
    expect(headerValues(message.headers, 'Supported')).toEqual(['timer', 'replaces']);
    expect(headerValue(message.headers, 'subject')).toBe('hello');
    expect(message.maxForwards).toBe(10);
    expect(message.via[0]?.transport).toBe('TCP');
  });
});

describe('when list headers carry several comma-separated values', () => {
  const text = crlf([
    'INVITE sip:1@gw SIP/2.0',
    'Via: SIP/2.0/UDP p1.example.com;branch=z9hG4bK1, SIP/2.0/UDP p2.example.com:5080;branch=z9hG4bK2;received=192.0.2.9',
    'Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK3;rport=5062',
    'Record-Route: <sip:p1.example.com;lr>, "Proxy, Two" <sip:p2.example.com;lr>',
    'To: <sip:1@gw>',
    'From: <sip:a@b>;tag=1',
    'Call-ID: x',
    'CSeq: 1 INVITE',
    'Max-Forwards: 70',
    'Content-Length: 0',
    '',
    '',
  ]);

  it('should split them without breaking quoted commas, in order', () => {
    const message = request(text);
    expect(message.via.map((v) => v.host)).toEqual([
      'p1.example.com',
      'p2.example.com',
      '10.0.0.1',
    ]);
    expect(message.via[1]).toMatchObject({ port: 5080, received: '192.0.2.9' });
    expect(message.via[2]?.rport).toBe(5062);
    expect(headerValues(message.headers, 'Record-Route')).toEqual([
      '<sip:p1.example.com;lr>',
      '"Proxy, Two" <sip:p2.example.com;lr>',
    ]);
  });
});

describe('when parsing responses', () => {
  it('should read status, reason and the body', () => {
    const message = response(
      crlf([
        'SIP/2.0 180 Ringing',
        'Via: SIP/2.0/UDP h;branch=z9hG4bKx',
        'To: <sip:a@b>;tag=9',
        'From: <sip:c@d>;tag=8',
        'Call-ID: z',
        'CSeq: 5 INVITE',
        'Content-Length: 2',
        '',
        'ok',
      ]),
    );
    expect(message.status).toBe(180);
    expect(message.reason).toBe('Ringing');
    expect(message.body).toBe('ok');
  });

  it('should refuse a status code outside 100-699', () => {
    const result = parseSipMessage(
      crlf(['SIP/2.0 999 Odd', 'Via: SIP/2.0/UDP h;branch=z9hG4bKx', '', '']),
    );
    expect(result.ok).toBe(false);
  });
});

describe('when parsing URIs', () => {
  it.each([
    ['sip:alice@example.com', { scheme: 'sip', user: 'alice', host: 'example.com' }],
    [
      'sips:alice:secret@example.com:5061;transport=tls',
      { scheme: 'sips', user: 'alice', password: 'secret', host: 'example.com', port: 5061 },
    ],
    ['sip:[2001:db8::10]:5070', { scheme: 'sip', host: '[2001:db8::10]', port: 5070 }],
    ['sip:%2B1555@gw', { scheme: 'sip', user: '+1555', host: 'gw' }],
    ['tel:+1-201-555-0123;phone-context=example.com', { scheme: 'tel', number: '+1-201-555-0123' }],
    ['SIP:bob@Example.COM', { scheme: 'sip', user: 'bob', host: 'Example.COM' }],
  ])('should parse %s', (text, expected) => {
    const result = parseUri(text);
    expect(result.ok && result.value).toMatchObject(expected);
  });

  it.each([
    ['http://example.com', 'unsupported URI scheme'],
    ['sip:alice@', 'invalid host'],
    ['sip:alice@example.com:99999', 'invalid port'],
    ['sip:al ice@example.com', 'white space'],
    ['sip:a@b;=x', 'parameter'],
    ['tel:call-me;x', 'invalid tel number'],
    ['sip:a%zz@b', 'invalid user part'],
    ['nocolon', 'without scheme'],
  ])('should refuse %s saying %s', (text, reason) => {
    const result = parseUri(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toContain(reason);
  });
});

describe('when parsing name-addr and addr-spec', () => {
  it('should give addr-spec parameters to the header, not the URI', () => {
    const result = parseNameAddr('sip:bob@example.com;tag=abc');
    expect(result.ok && result.value.uri.params).toEqual([]);
    expect(result.ok && paramValue(result.value.params, 'tag')).toBe('abc');
  });

  it('should keep URI parameters inside angle brackets with the URI', () => {
    const result = parseNameAddr('Bob <sip:bob@example.com;transport=tcp>;tag=t1;expires=60');
    expect(result.ok && result.value).toMatchObject({
      displayName: 'Bob',
      uriText: 'sip:bob@example.com;transport=tcp',
    });
    expect(result.ok && result.value.params).toEqual([
      ['tag', 't1'],
      ['expires', '60'],
    ]);
  });

  it('should unescape a quoted display name', () => {
    const result = parseNameAddr('"Say \\"hi\\"" <sip:x@y>');
    expect(result.ok && result.value.displayName).toBe('Say "hi"');
  });

  it.each([
    '"unterminated <sip:x@y>',
    '<sip:x@y',
    '< sip:x@y >',
    'sip:x@y, sip:z@w',
    'Bell, Alex <sip:x@y>',
  ])('should refuse %s', (text) => {
    expect(parseNameAddr(text).ok).toBe(false);
  });
});

describe('when parsing Via', () => {
  it('should accept white space around slashes and the port colon', () => {
    const result = parseVia(
      'SIP / 2.0 / udp  host.example.com : 5090 ; branch = z9hG4bKq ; received=1.2.3.4',
    );
    expect(result.ok && result.value).toMatchObject({
      transport: 'UDP',
      host: 'host.example.com',
      port: 5090,
      branch: 'z9hG4bKq',
      received: '1.2.3.4',
    });
  });

  it.each([
    'SIP/3.0/UDP h',
    'SIP/2.0 h',
    'SIP/2.0/UDP h;rport=abc',
    'SIP/2.0/UDP h:70000',
    'SIP/2.0/UDP',
  ])('should refuse %s', (text) => {
    expect(parseVia(text).ok).toBe(false);
  });
});

describe('when a request is malformed', () => {
  const base = (
    overrides: Record<string, string | null>,
    startLine = 'INVITE sip:1@gw SIP/2.0',
  ): string => {
    const headers: Record<string, string | null> = {
      Via: 'SIP/2.0/UDP 10.0.0.1;branch=z9hG4bKm',
      To: '<sip:1@gw>',
      From: '<sip:a@b>;tag=1',
      'Call-ID': 'm1',
      CSeq: '1 INVITE',
      'Max-Forwards': '70',
      'Content-Length': '0',
      ...overrides,
    };
    const lines = [startLine];
    for (const [name, value] of Object.entries(headers))
      if (value !== null) lines.push(`${name}: ${value}`);
    return `${crlf(lines)}\r\n\r\n`;
  };

  it.each<[string, string, number | undefined, string]>([
    ['no Call-ID', base({ 'Call-ID': null }), 400, 'no Call-ID'],
    ['no From', base({ From: null }), 400, 'no From'],
    ['a CSeq method that differs from the method', base({ CSeq: '1 BYE' }), 400, 'does not match'],
    ['a CSeq number of 2**31 or more', base({ CSeq: '2147483648 INVITE' }), 400, 'below 2**31'],
    ['Max-Forwards above 255', base({ 'Max-Forwards': '300' }), 400, 'Max-Forwards'],
    ['a Content-Length beyond the body', base({ 'Content-Length': '20' }), 400, 'larger than'],
    ['a negative Content-Length', base({ 'Content-Length': '-1' }), 400, 'invalid Content-Length'],
    [
      'an unsupported SIP version',
      base({}, 'INVITE sip:1@gw SIP/7.0'),
      505,
      'unsupported SIP version',
    ],
    [
      'an unknown URI scheme',
      base({}, 'INVITE nobody:opaque SIP/2.0'),
      416,
      'unsupported URI scheme',
    ],
    [
      'two spaces after the method',
      base({}, 'INVITE  sip:1@gw SIP/2.0'),
      400,
      'malformed request line',
    ],
    ['an unterminated quote in From', base({ From: '"Mr. J <sip:a@b>;tag=1' }), 400, 'From'],
    [
      'two different To headers',
      `${base({}).trimEnd()}\r\nTo: <sip:2@gw>\r\n\r\n`,
      400,
      'more than one To',
    ],
    ['no Via at all', base({ Via: null }), undefined, 'no Via'],
    [
      'a header line without colon',
      `${base({}).trimEnd()}\r\nGarbage line\r\n\r\n`,
      400,
      'without a name',
    ],
  ])('should refuse %s with the right answer', (_what, text, status, reason) => {
    const result = parseSipMessage(text);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.reason).toContain(reason);
    expect(result.answerable?.status).toBe(status);
  });

  it('should refuse a message above the size limit before parsing', () => {
    const result = parseSipMessage(base({}), { maxBytes: 100 });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toContain('above the limit');
  });

  it('should require Content-Length on a stream transport', () => {
    const result = parseSipMessage(base({ 'Content-Length': null }), { stream: true });
    expect(result.ok).toBe(false);
  });
});

describe('when a datagram carries bytes beyond Content-Length', () => {
  it('should ignore the extra bytes', () => {
    const message: SipMessage = request(INVITE.replace('Content-Length: 4', 'Content-Length: 1'));
    expect(message.body).toBe('v');
  });

  it('should skip leading CRLF keepalives', () => {
    expect(request(`\r\n\r\n${INVITE}`).method).toBe('INVITE');
  });
});
