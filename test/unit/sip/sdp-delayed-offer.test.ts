/**
 * callgate as offerer, for an INVITE without SDP: the offer it puts in the 200 and the check of
 * the answer the ACK carries. Pure; the port allocation is a fixed fake.
 */
import { describe, expect, it } from 'vitest';
import { readAckAnswer, unusableAnswerReason } from '../../../gateway/sip/delayed-offer.ts';
import { acceptAnswer, buildOffer } from '../../../gateway/sip/sdp-negotiation.ts';
import { parseSdp, serializeSdp } from '../../../gateway/sip/sdp-parser.ts';
import type { AudioCodecName, SdpSession } from '../../../gateway/sip/sdp-types.ts';

const local = { address: '198.51.100.7', port: 20_000 };
const offerFor = (preference: AudioCodecName[]): SdpSession =>
  buildOffer({ preference, local, sessionId: '42', sessionVersion: 1 });

function sdp(...lines: string[]): SdpSession {
  const parsed = parseSdp(
    `${['v=0', 'o=- 1 1 IN IP4 192.0.2.10', 's=-', 't=0 0', ...lines].join('\r\n')}\r\n`,
  );
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
}

describe('when callgate builds the offer for a 200', () => {
  it.each<[AudioCodecName[], string]>([
    [['PCMU', 'PCMA', 'opus'], 'm=audio 20000 RTP/AVP 0 8 111 101 110'],
    [['opus', 'PCMU'], 'm=audio 20000 RTP/AVP 111 0 101 110'],
    [['PCMA'], 'm=audio 20000 RTP/AVP 8 101'],
    [['opus'], 'm=audio 20000 RTP/AVP 111 110'],
    [['PCMA', 'PCMA'], 'm=audio 20000 RTP/AVP 8 101'],
  ])('should offer %j as %s with telephone-event at each clock rate', (preference, mLine) => {
    const text = serializeSdp(offerFor(preference));
    expect(text).toContain(`\r\n${mLine}\r\n`);
    expect(text).toContain('\r\nc=IN IP4 198.51.100.7\r\n');
    expect(text).toContain('\r\na=sendrecv\r\n');
    expect(text).toContain('\r\na=ptime:20\r\n');
  });

  it('should write rtpmaps a peer can read back (mono codecs without a channel count, opus with /2)', () => {
    const text = serializeSdp(offerFor(['PCMU', 'opus']));
    expect(text).toContain('a=rtpmap:0 PCMU/8000\r\n');
    expect(text).toContain('a=rtpmap:111 opus/48000/2\r\n');
    expect(text).toContain('a=fmtp:111 useinbandfec=1\r\n');
    expect(text).toContain('a=rtpmap:101 telephone-event/8000\r\n');
    expect(parseSdp(text).ok).toBe(true);
  });

  it('should use an IP6 connection for an IPv6 media address', () => {
    expect(
      serializeSdp(
        buildOffer({
          preference: ['PCMU'],
          local: { address: '2001:db8::7', port: 20_002 },
          sessionId: '1',
          sessionVersion: 1,
        }),
      ),
    ).toContain('\r\nc=IN IP6 2001:db8::7\r\n');
  });
});

describe('when the ACK carries the answer to callgate offer', () => {
  const offer = offerFor(['PCMU', 'PCMA', 'opus']);

  it.each<[string, SdpSession, Record<string, unknown>]>([
    [
      'PCMA with DTMF',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 8 101', 'a=rtpmap:101 telephone-event/8000'),
      {
        codec: 'PCMA',
        payloadType: 8,
        telephoneEvent: { payloadType: 101, clockRate: 8000 },
        remote: { address: '192.0.2.10', port: 4000 },
      },
    ],
    [
      'the answerer first choice among several',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 8 0'),
      { codec: 'PCMA', payloadType: 8 },
    ],
    [
      'opus under another payload type number',
      sdp(
        'c=IN IP4 192.0.2.10',
        'm=audio 4000 RTP/AVP 96 97',
        'a=rtpmap:96 opus/48000/2',
        'a=rtpmap:97 telephone-event/48000',
      ),
      {
        codec: 'opus',
        payloadType: 96,
        clockRate: 48000,
        channels: 2,
        telephoneEvent: { payloadType: 97, clockRate: 48000 },
      },
    ],
    [
      'a media-level c= line',
      sdp('m=audio 4002 RTP/AVP 0', 'c=IN IP4 192.0.2.20'),
      { codec: 'PCMU', remote: { address: '192.0.2.20', port: 4002 } },
    ],
    [
      'a codec it skips first (G.729) before one callgate offered',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 18 0'),
      { codec: 'PCMU' },
    ],
    [
      'recvonly (callgate only sends)',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0', 'a=recvonly'),
      { direction: 'sendonly', held: false },
    ],
    [
      'sendonly (the caller holds)',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0', 'a=sendonly'),
      { direction: 'recvonly', held: true },
    ],
    [
      'the RFC 2543 hold address',
      sdp('c=IN IP4 0.0.0.0', 'm=audio 4000 RTP/AVP 0'),
      { direction: 'recvonly', held: true },
    ],
    [
      'a ptime of its own',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0', 'a=ptime:30'),
      { ptime: 30 },
    ],
  ])('should settle %s', (_what, answer, expected) => {
    const result = acceptAnswer(offer, answer);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.media).toMatchObject(expected);
  });

  it('should not report telephone-event at a clock rate other than the codec', () => {
    const result = acceptAnswer(
      offer,
      sdp(
        'c=IN IP4 192.0.2.10',
        'm=audio 4000 RTP/AVP 0 110',
        'a=rtpmap:110 telephone-event/48000',
      ),
    );
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.media.telephoneEvent).toBeUndefined();
  });

  it.each<[string, SdpSession, 'no-common-codec' | 'bad-sdp', RegExp]>([
    [
      'only a codec callgate did not offer',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 18'),
      'no-common-codec',
      /answered 18, offered 0 8 111 101 110/,
    ],
    [
      'only telephone-event',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 101', 'a=rtpmap:101 telephone-event/8000'),
      'no-common-codec',
      /answered 101/,
    ],
    [
      'opus at the wrong rate',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 111', 'a=rtpmap:111 opus/16000'),
      'no-common-codec',
      /answered 111/,
    ],
    [
      'the audio stream refused with port 0',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 0 RTP/AVP 0'),
      'no-common-codec',
      /port 0/,
    ],
    ['no m= line', sdp('c=IN IP4 192.0.2.10'), 'bad-sdp', /0 m= lines for 1 offered/],
    [
      'an extra m= line',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0', 'm=video 4002 RTP/AVP 31'),
      'bad-sdp',
      /2 m= lines for 1 offered/,
    ],
    [
      'video in the place of audio',
      sdp('c=IN IP4 192.0.2.10', 'm=video 4000 RTP/AVP 31'),
      'bad-sdp',
      /answered video/,
    ],
    [
      'another transport',
      sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/SAVP 0'),
      'bad-sdp',
      /RTP\/SAVP/,
    ],
    ['no connection address', sdp('m=audio 4000 RTP/AVP 0'), 'bad-sdp', /no c= line/],
  ])('should refuse %s', (_what, answer, reason, detail) => {
    const result = acceptAnswer(offer, answer);
    expect(result).toMatchObject({ ok: false, reason });
    if (!result.ok) expect(result.detail).toMatch(detail);
  });

  it('should refuse PCMU in the answer when the tenant only offered PCMA', () => {
    expect(
      acceptAnswer(offerFor(['PCMA']), sdp('c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0')).ok,
    ).toBe(false);
  });
});

describe('when the ACK body is read as the answer', () => {
  const offer = offerFor(['PCMU', 'PCMA', 'opus']);
  const good =
    'v=0\r\no=- 1 1 IN IP4 192.0.2.10\r\ns=-\r\nc=IN IP4 192.0.2.10\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n';

  it.each<[string, string | undefined, string, RegExp | undefined]>([
    ['an SDP answer', 'application/sdp', good, undefined],
    [
      'an SDP answer with parameters on the type',
      'Application/SDP; charset=utf-8',
      good,
      undefined,
    ],
    ['no body', 'application/sdp', '', /no SDP answer/],
    ['a body without a type', undefined, good, /untyped/],
    ['a body of another type', 'text/plain', good, /text\/plain, not application\/sdp/],
    [
      'SDP that does not parse',
      'application/sdp',
      'v=0\r\nm=audio x RTP/AVP 0\r\n',
      /bad SDP in the ACK/,
    ],
  ])('should take %s', (_what, contentType, body, refused) => {
    const result = readAckAnswer(contentType, body, offer);
    if (refused === undefined) expect(result).toMatchObject({ ok: true, media: { codec: 'PCMU' } });
    else
      expect(result).toMatchObject({
        ok: false,
        detail: expect.stringMatching(refused) as unknown,
      });
  });

  it('should refuse 20,000 mutated answers without throwing, and accept only answers naming an offered codec', () => {
    let seed = 11;
    const random = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return Math.floor((seed / 2_147_483_648) * n);
    };
    const junk = [
      '\r\n',
      '=',
      ' ',
      '\u0000',
      'm=audio 0 RTP/AVP 0\r\n',
      'c=IN IP6 ::\r\n',
      'a=rtpmap:0 opus/48000/2\r\n',
      '99999999999',
      '"',
      '\\',
      'é',
    ];
    for (let i = 0; i < 20_000; i++) {
      const chars = [...good];
      const edits = 1 + random(4);
      for (let e = 0; e < edits; e++) {
        const at = random(chars.length + 1);
        const choice = random(3);
        if (choice === 0) chars.splice(at, 1);
        else if (choice === 1) chars.splice(at, 0, junk[random(junk.length)] ?? '');
        else chars.splice(at, 0, String.fromCharCode(random(256)));
      }
      const result = readAckAnswer('application/sdp', chars.join(''), offer);
      if (result.ok) expect(['PCMU', 'PCMA', 'opus']).toContain(result.media.codec);
      else {
        const text = /^SIP ;cause=488 ;text="(.*)"$/s.exec(
          unusableAnswerReason(result.detail),
        )?.[1];
        expect(text).toBeDefined();
        expect(
          [...(text ?? '')].every(
            (char) =>
              char !== '"' &&
              char !== '\\' &&
              char.charCodeAt(0) >= 0x20 &&
              char.charCodeAt(0) !== 0x7f,
          ),
        ).toBe(true);
      }
    }
  });
});

describe('when the Reason header is written for the BYE', () => {
  it('should keep the text inside its quoted-string whatever the detail holds, and bound it', () => {
    expect(unusableAnswerReason('bad "SDP" \\ here\r\nInjected: header')).toBe(
      'SIP ;cause=488 ;text="bad  SDP    here  Injected: header"',
    );
    expect(unusableAnswerReason('x'.repeat(500)).length).toBe(
      'SIP ;cause=488 ;text=""'.length + 120,
    );
  });
});
