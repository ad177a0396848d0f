/**
 * The torture messages of RFC 4475 section 3.1 that a user agent server meets, as tables: the
 * valid ones must parse to the values the RFC describes, the invalid ones must be refused with
 * the answer the RFC asks for (or dropped when nothing can be answered).
 */
import { describe, expect, it } from 'vitest';
import { headerValue, headerValues } from '../../../gateway/sip/header-names.ts';
import { paramValue } from '../../../gateway/sip/header-parser.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import type { SipMessage } from '../../../gateway/sip/message-types.ts';

/** RFC 4475 writes messages with LF line ends and `<allOneLine>` joins; the wire has CRLF. */
const wire = (text: string): string => text.replace(/\r?\n/g, '\r\n');

const SDP_150 = [
  'v=0',
  'o=mhandley 29739 7272939 IN IP4 192.0.2.3',
  's=-',
  'c=IN IP4 192.0.2.4',
  't=0 0',
  'm=audio 49217 RTP/AVP 0 12',
  'm=video 3227 RTP/AVP 31',
  'a=rtpmap:31 LPC',
  '',
].join('\r\n');

const WSINV = `${wire(`INVITE sip:vivekg@chair-dnrc.example.com;unknownparam SIP/2.0
TO :
 sip:vivekg@chair-dnrc.example.com ;   tag    = 1918181833n
from   : "J Rosenberg \\\\\\""       <sip:jdrosen@example.com>
  ;
  tag = 98asjd8
MaX-fOrWaRdS: 0068
Call-ID: wsinv.ndaksdj@192.0.2.1
Content-Length   : ${Buffer.byteLength(SDP_150)}
cseq: 0009
  INVITE
Via  : SIP  /   2.0
 /UDP
    192.0.2.2;branch=390skdjuw
s :
NewFangledHeader:   newfangled value
 continued newfangled value
UnknownHeaderWithUnusualValue: ;;,,;;,;
Content-Type: application/sdp
Route:
 <sip:services.example.com;lr;unknownwith=value;unknown-no-value>
v:  SIP  / 2.0  / TCP     spindle.example.com   ;
  branch  =   z9hG4bK9ikj8  ,
 SIP  /    2.0   / UDP  192.168.255.111   ; branch=
 z9hG4bK30239
m:"Quoted string \\"\\"" <sip:jdrosen@example.com> ; newparam =
      newvalue ;
  secondparam ; q = 0.33

`)}${SDP_150}`;

const INTMETH =
  wire(`!interesting-Method0123456789_*+\`.%indeed'~ sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com SIP/2.0
Via: SIP/2.0/TCP host1.example.com;branch=z9hG4bK-.!%66*_+\`'~
To: "BEL:\\\x07 NUL:\\\x00 DEL:\\\x7F" <sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*@example.com>
From: token1~\` token2'+_ token3*%!.- <sip:mundane@example.com>;fromParam''~+*_!.-%="работающий";tag=_token~1'+\`*%!-.
Call-ID: intmeth.word%ZK-!.*_+'@word\`~)(><:\\/"][?}{
CSeq: 139122385 !interesting-Method0123456789_*+\`.%indeed'~
Max-Forwards: 255
extensionHeader-!.%*+_\`'~: 大停電
Content-Length: 0

`);

const ESC01_SDP = [
  'v=0',
  'o=mhandley 29739 7272939 IN IP4 192.0.2.1',
  's=-',
  'c=IN IP4 192.0.2.1',
  't=0 0',
  'm=audio 49217 RTP/AVP 0 12',
  'm=video 3227 RTP/AVP 31',
  'a=rtpmap:31 LPC',
  '',
].join('\r\n');
const ESC01 = `${wire(`INVITE sip:sips%3Auser%40example.com@example.net SIP/2.0
To: sip:%75se%72@example.com
From: <sip:I%20have%20spaces@example.net>;tag=938
Max-Forwards: 87
i: esc01.239409asdfakjkn23onasd0-3234
CSeq: 234234 INVITE
Via: SIP/2.0/UDP host5.example.net;branch=z9hG4bKkdjuw
C: application/sdp
Contact:
  <sip:cal%6Cer@host5.example.net;%6C%72;n%61me=v%61lue%25%34%31>
Content-Length: ${Buffer.byteLength(ESC01_SDP)}

`)}${ESC01_SDP}`;

const ESCNULL = wire(`REGISTER sip:example.com SIP/2.0
To: sip:null-%00-null@example.com
From: sip:null-%00-null@example.com;tag=839923423
Max-Forwards: 70
Call-ID: escnull.39203ndfvkjdasfkq3w4otrq0adsfdfnavd
CSeq: 14398234 REGISTER
Via: SIP/2.0/UDP host5.example.com;branch=z9hG4bKkdjuw
Contact: <sip:%00@host5.example.com>
Contact: <sip:%00%00@host5.example.com>
L:0

`);

const ESC02 = wire(`RE%47IST%45R sip:registrar.example.com SIP/2.0
To: "%Z%45" <sip:resource@example.com>
From: "%Z%45" <sip:resource@example.com>;tag=f232jadfj23
Call-ID: esc02.asdfnqwo34rq23i34jrjasdcnl23nrlknsdf
Via: SIP/2.0/TCP host.example.com;branch=z9hG4bK209%fzsnel234
CSeq: 29344 RE%47IST%45R
Max-Forwards: 70
Contact: <sip:alias1@host1.example.com>
C%6Fntact: <sip:alias2@host2.example.com>
Contact: <sip:alias3@host3.example.com>
l: 0

`);

const LWSDISP = wire(`OPTIONS sip:user@example.com SIP/2.0
To: sip:user@example.com
From: caller<sip:caller@example.com>;tag=323
Max-Forwards: 70
Call-ID: lwsdisp.1234abcd@funky.example.com
CSeq: 60 OPTIONS
Via: SIP/2.0/UDP funky.example.com;branch=z9hG4bKkdjuw
l: 0

`);

const DBLREQ = wire(`REGISTER sip:example.com SIP/2.0
To: sip:j.user@example.com
From: sip:j.user@example.com;tag=43251j3j324
Max-Forwards: 8
I: dblreq.0ha0isndaksdj99sdfafnl3lk233412
Contact: sip:j.user@host.example.com
CSeq: 8 REGISTER
Via: SIP/2.0/UDP 192.0.2.125;branch=z9hG4bKkdjuw23492
Content-Length: 0


INVITE sip:joe@example.com SIP/2.0
t: sip:joe@example.com
From: sip:caller@example.net;tag=141334
Max-Forwards: 8
Call-ID: dblreq.0ha0isnda977644900765@192.0.2.15
CSeq: 8 INVITE
Via: SIP/2.0/UDP 192.0.2.15;branch=z9hG4bKkdjuw380234
Content-Type: application/sdp
Content-Length: 0

`);

const SEMIURI = wire(`OPTIONS sip:user;par=u%40example.net@example.com SIP/2.0
To: sip:j_user@example.com
From: sip:caller@example.org;tag=33242
Max-Forwards: 3
Call-ID: semiuri.0ha0isndaksdj
CSeq: 8 OPTIONS
Accept: application/sdp, application/pkcs7-mime,
        multipart/mixed, multipart/signed,
        message/sip, message/sipfrag
Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKkdjuw
l: 0

`);

const TRANSPORTS = wire(`OPTIONS sip:user@example.com SIP/2.0
To: sip:user@example.com
From: <sip:caller@example.com>;tag=323
Max-Forwards: 70
Call-ID:  transports.kijh4akdnaqjkwendsasfdj
Accept: application/sdp
CSeq: 60 OPTIONS
Via: SIP/2.0/UDP t1.example.com;branch=z9hG4bKkdjuw
Via: SIP/2.0/SCTP t2.example.com;branch=z9hG4bKklasjdhf
Via: SIP/2.0/TLS t3.example.com;branch=z9hG4bK2980unddj
Via: SIP/2.0/UNKNOWN t4.example.com;branch=z9hG4bKasd0f3en
Via: SIP/2.0/TCP t5.example.com;branch=z9hG4bK0a9idfnee
l: 0

`);

const UNREASON = wire(`SIP/2.0 200 = 2**3 * 5**2 но сто девяносто девять - простое
Via: SIP/2.0/UDP 192.0.2.198;branch=z9hG4bK1324923
Call-ID: unreason.1234ksdfak3j2erwedfsASdf
CSeq: 35 INVITE
From: sip:user@example.com;tag=11141343
To: sip:user@example.edu;tag=2229
Content-Length: 0
Contact: <sip:user@host198.example.com>

`);

const NOREASON = wire(`SIP/2.0 100 \r
Via: SIP/2.0/UDP 192.0.2.105;branch=z9hG4bK2398ndaoe
Call-ID: noreason.asndj203insdf99223ndf
CSeq: 35 INVITE
From: <sip:user@example.com>;tag=39ansfi3
To: <sip:user@example.edu>;tag=902jndnke3
Content-Length: 0
Contact: <sip:user@host105.example.com>

`).replace('\r\r\n', '\r\n');

const ZEROMF = wire(`OPTIONS sip:user@example.com SIP/2.0
To: sip:user@example.com
From: sip:caller@example.net;tag=3ghsd41
Call-ID: zeromf.jfasdlfnm2o2l43r5u0asdfas
CSeq: 39234321 OPTIONS
Via: SIP/2.0/UDP host1.example.com;branch=z9hG4bKkdjuw2349i
Max-Forwards: 0
Content-Length: 0

`);

function parsed(text: string): SipMessage {
  const result = parseSipMessage(text);
  if (!result.ok) throw new Error(`expected a valid message, got: ${result.reason}`);
  return result.value;
}

describe('when parsing the valid torture messages of RFC 4475 section 3.1.1', () => {
  it('should read wsinv: folding, LWS around colons, mixed compact forms and leading zeros', () => {
    const message = parsed(WSINV);
    expect(message.kind === 'request' && message.method).toBe('INVITE');
    expect(message.kind === 'request' && message.uri.params).toEqual([['unknownparam', null]]);
    expect(paramValue(message.to.params, 'tag')).toBe('1918181833n');
    expect(message.from.displayName).toBe('J Rosenberg \\"');
    expect(paramValue(message.from.params, 'tag')).toBe('98asjd8');
    expect(message.kind === 'request' && message.maxForwards).toBe(68);
    expect(message.cseq).toEqual({ seq: 9, method: 'INVITE' });
    expect(message.via.map((via) => [via.transport, via.host, via.branch])).toEqual([
      ['UDP', '192.0.2.2', '390skdjuw'],
      ['TCP', 'spindle.example.com', 'z9hG4bK9ikj8'],
      ['UDP', '192.168.255.111', 'z9hG4bK30239'],
    ]);
    expect(headerValue(message.headers, 'Subject')).toBe('');
    expect(headerValue(message.headers, 'NewFangledHeader')).toBe(
      'newfangled value continued newfangled value',
    );
    expect(headerValue(message.headers, 'UnknownHeaderWithUnusualValue')).toBe(';;,,;;,;');
    expect(headerValues(message.headers, 'Contact')).toHaveLength(1);
    expect(message.body).toBe(SDP_150);
  });

  it('should read intmeth: a method, URI, branch and tag using every token character', () => {
    const message = parsed(INTMETH);
    expect(message.kind === 'request' && message.method).toBe(
      "!interesting-Method0123456789_*+`.%indeed'~",
    );
    expect(message.kind === 'request' && message.uri).toMatchObject({
      user: "1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*",
      password: "&it+has=1,weird!*pas$wo~d_too.(doesn't-it)",
      host: 'example.com',
    });
    expect(message.via[0]?.branch).toBe("z9hG4bK-.!%66*_+`'~");
    expect(message.to.displayName).toBe('BEL:\x07 NUL:\x00 DEL:\x7F');
    expect(message.from.displayName).toBe("token1~` token2'+_ token3*%!.-");
    expect(paramValue(message.from.params, 'tag')).toBe("_token~1'+`*%!-.");
    expect(message.callId).toBe('intmeth.word%ZK-!.*_+\'@word`~)(><:\\/"][?}{');
    expect(headerValue(message.headers, "extensionHeader-!.%*+_`'~")).toBe('大停電');
  });

  it('should read esc01: escapes in the Request-URI user, To, From and Contact parameters', () => {
    const message = parsed(ESC01);
    expect(message.kind === 'request' && message.uri).toMatchObject({
      user: 'sips:user@example.com',
      host: 'example.net',
    });
    expect(message.to.uri).toMatchObject({ user: 'user' });
    expect(message.from.uri).toMatchObject({ user: 'I have spaces' });
    expect(message.callId).toBe('esc01.239409asdfakjkn23onasd0-3234');
  });

  it('should read escnull: an escaped NUL in user parts', () => {
    const message = parsed(ESCNULL);
    expect(message.to.uri).toMatchObject({ user: 'null-\x00-null' });
    expect(headerValues(message.headers, 'Contact')).toHaveLength(2);
  });

  it('should read esc02: % in a method and a header name is not an escape', () => {
    const message = parsed(ESC02);
    expect(message.kind === 'request' && message.method).toBe('RE%47IST%45R');
    expect(headerValues(message.headers, 'Contact')).toHaveLength(2);
    expect(headerValue(message.headers, 'C%6Fntact')).toBe('<sip:alias2@host2.example.com>');
    expect(message.to.displayName).toBe('%Z%45');
  });

  it('should read lwsdisp: no white space between display name and <', () => {
    expect(parsed(LWSDISP).from.displayName).toBe('caller');
  });

  it('should read dblreq: only the first request of a datagram counts', () => {
    const message = parsed(DBLREQ);
    expect(message.kind === 'request' && message.method).toBe('REGISTER');
    expect(message.body).toBe('');
  });

  it('should read semiuri: a ";" inside the user part', () => {
    const message = parsed(SEMIURI);
    expect(message.kind === 'request' && message.uri).toMatchObject({
      user: 'user;par=u@example.net',
      host: 'example.com',
      params: [],
    });
    expect(headerValues(message.headers, 'Accept')).toHaveLength(6);
  });

  it('should read transports: Via with UDP, SCTP, TLS, an unknown transport and TCP', () => {
    expect(parsed(TRANSPORTS).via.map((via) => via.transport)).toEqual([
      'UDP',
      'SCTP',
      'TLS',
      'UNKNOWN',
      'TCP',
    ]);
  });

  it('should read unreason: a reason phrase with symbols and UTF-8', () => {
    const message = parsed(UNREASON);
    expect(message.kind === 'response' && message.reason).toBe(
      '= 2**3 * 5**2 но сто девяносто девять - простое',
    );
  });

  it('should read noreason: an empty reason phrase', () => {
    const message = parsed(NOREASON);
    expect(message.kind === 'response' && [message.status, message.reason]).toEqual([100, '']);
  });

  it('should read zeromf: Max-Forwards 0 parses (the stack answers 483)', () => {
    const message = parsed(ZEROMF);
    expect(message.kind === 'request' && message.maxForwards).toBe(0);
  });

  it('should read a long request: many Vias, a long Call-ID and a long header', () => {
    const vias = Array.from(
      { length: 40 },
      (_, i) =>
        `Via: SIP/2.0/TCP sip${i}.example.com:${5060 + i};branch=z9hG4bK${'a'.repeat(40)}${i}`,
    );
    const text = wire(
      [
        'INVITE sip:user@example.com SIP/2.0',
        `To: "I have a user name of ${'extreme'.repeat(30)} proportion" <sip:user@example.com:6000;unknownparam1=very${'long'.repeat(50)}value>`,
        'From: sip:caller@example.net;tag=12982424',
        `Call-ID: longreq.${'one'.repeat(200)}`,
        'CSeq: 3882340 INVITE',
        ...vias,
        `X-Long: ${'x'.repeat(4000)}`,
        'Max-Forwards: 70',
        'Content-Length: 0',
        '',
        '',
      ].join('\n'),
    );
    const message = parsed(text);
    expect(message.via).toHaveLength(40);
    expect(message.callId).toHaveLength(8 + 600);
  });
});

const invalid = (lines: string[]): string => wire(`${lines.join('\n')}\n\n`);
const routingOk = (overrides: Record<string, string> = {}): string[] =>
  Object.entries({
    To: 'sip:user@example.com',
    From: 'sip:caller@example.net;tag=2234923',
    'Max-Forwards': '70',
    'Call-ID': 'torture.invalid',
    CSeq: '17 OPTIONS',
    Via: 'SIP/2.0/UDP host1.example.com;branch=z9hG4bKkdjuw',
    'Content-Length': '0',
    ...overrides,
  }).map(([name, value]) => `${name}: ${value}`);

describe('when parsing the invalid torture messages of RFC 4475 section 3.1.2', () => {
  it.each<[string, string, number | undefined]>([
    [
      'badinv01: an unbalanced quote in To of an INVITE',
      invalid([
        'INVITE sip:user@example.com SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE', To: '"Mr. J. User <sip:j.user@example.com>' }),
      ]),
      400,
    ],
    [
      'clerr: Content-Length larger than the body',
      invalid([
        'INVITE sip:user@example.com SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE', 'Content-Length': '9999' }),
      ]),
      400,
    ],
    [
      'ncl: negative Content-Length',
      invalid([
        'INVITE sip:user@example.com SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE', 'Content-Length': '-999' }),
      ]),
      400,
    ],
    [
      'scalar02: CSeq and Max-Forwards out of range',
      invalid([
        'REGISTER sip:example.com SIP/2.0',
        ...routingOk({ CSeq: '36893488147419103232 REGISTER', 'Max-Forwards': '300' }),
      ]),
      400,
    ],
    [
      'quotbal: unterminated quoted string in To',
      invalid([
        'INVITE sip:user@example.com SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE', To: '"Mr. J. User <sip:j.user@example.com>' }),
      ]),
      400,
    ],
    [
      'ltgtruri: Request-URI inside angle brackets',
      invalid(['INVITE <sip:user@example.com> SIP/2.0', ...routingOk({ CSeq: '8 INVITE' })]),
      400,
    ],
    [
      'lwsruri: white space inside the Request-URI',
      invalid(['INVITE sip:user@example.com; lr SIP/2.0', ...routingOk({ CSeq: '8 INVITE' })]),
      400,
    ],
    [
      'lwsstart: several spaces in the request line',
      invalid(['INVITE  sip:user@example.com  SIP/2.0', ...routingOk({ CSeq: '8 INVITE' })]),
      400,
    ],
    [
      'trws: trailing white space after the version',
      invalid(['OPTIONS sip:remote-target@example.com SIP/2.0  ', ...routingOk()]),
      400,
    ],
    [
      'escruri: headers in the Request-URI',
      invalid([
        'INVITE sip:user@example.com?Route=%3Csip:example.com%3E SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE' }),
      ]),
      400,
    ],
    [
      'badaspec: white space inside <URI>',
      invalid([
        'OPTIONS sip:user@example.org SIP/2.0',
        ...routingOk({ To: '"Watson, Thomas" < sip:t.watson@example.org >' }),
      ]),
      400,
    ],
    [
      'baddn: unquoted display name with a comma',
      invalid([
        'OPTIONS sip:t.watson@example.org SIP/2.0',
        ...routingOk({ From: 'Bell, Alexander <sip:a.g.bell@example.com>;tag=43' }),
      ]),
      400,
    ],
    [
      'badvers: SIP/7.0',
      invalid(['OPTIONS sip:t.watson@example.org SIP/7.0', ...routingOk()]),
      505,
    ],
    [
      'mismatch01: CSeq method differs from the method',
      invalid(['OPTIONS sip:user@example.com SIP/2.0', ...routingOk({ CSeq: '17 INVITE' })]),
      400,
    ],
    [
      'unkscm: unknown Request-URI scheme',
      invalid(['OPTIONS nobodyKnowsThisScheme:totallyopaquecontent SIP/2.0', ...routingOk()]),
      416,
    ],
    [
      'novelsc: an unknown scheme with dots',
      invalid(['OPTIONS soap.beep://192.0.2.103:3002 SIP/2.0', ...routingOk()]),
      416,
    ],
    [
      'mcl01: several different Content-Length values',
      invalid(
        [
          'OPTIONS sip:user@example.com SIP/2.0',
          ...routingOk(),
          'Content-Length: 3',
          'Content-Length: 8',
        ].concat([]),
      ),
      400,
    ],
    [
      'multi01: several different To values',
      invalid([
        'INVITE sip:user@company.com SIP/2.0',
        ...routingOk({ CSeq: '8 INVITE' }),
        'To: sip:other@company.com',
      ]),
      400,
    ],
    [
      'insuf: no Call-ID, From or To',
      invalid([
        'INVITE sip:user@example.com SIP/2.0',
        'CSeq: 193942 INVITE',
        'Via: SIP/2.0/UDP 192.0.2.95;branch=z9hG4bKkdj.insuf',
        'Content-Type: application/sdp',
        'l: 0',
      ]),
      400,
    ],
    ['a response with a broken status line', invalid(['SIP/2.0 20 OK', ...routingOk()]), undefined],
    [
      'an unreadable topmost Via',
      invalid(['OPTIONS sip:user@example.com SIP/2.0', ...routingOk({ Via: 'SIP/2.0 nowhere' })]),
      undefined,
    ],
  ])('should refuse %s', (_name, text, status) => {
    const result = parseSipMessage(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.answerable?.status).toBe(status);
  });
});
