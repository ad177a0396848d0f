import { describe, expect, it } from 'vitest';
import { parseSdp, serializeSdp } from '../../../gateway/sip/sdp-parser.ts';
import { answerOffer, type SdpAnswerOptions } from '../../../gateway/sip/sdp-negotiation.ts';
import type { AudioCodecName, SdpSession } from '../../../gateway/sip/sdp-types.ts';

const sdp = (...lines: string[]): string => `${lines.join('\r\n')}\r\n`;
const HEAD = ['v=0', 'o=- 1 1 IN IP4 192.0.2.10', 's=-', 't=0 0'];

function offer(text: string): SdpSession {
  const result = parseSdp(text);
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/** A fake allocation: the media layer's port allocator is not part of these tests. */
const options = (preference: AudioCodecName[] = ['PCMU', 'PCMA', 'opus']): SdpAnswerOptions => ({
  preference,
  local: { address: '198.51.100.7', port: 20_000 },
  sessionId: '42',
  sessionVersion: 1,
});

describe('when parsing an SDP offer', () => {
  const text = sdp(
    ...HEAD,
    'c=IN IP4 192.0.2.10',
    'a=sendrecv',
    'm=audio 49170 RTP/AVP 0 8 111 101',
    'c=IN IP4 192.0.2.11',
    'a=rtpmap:111 opus/48000/2',
    'a=fmtp:111 minptime=10;useinbandfec=1',
    'a=rtpmap:101 telephone-event/8000',
    'a=fmtp:101 0-15',
    'a=ptime:30',
    'a=sendonly',
    'm=video 51372 RTP/AVP 31',
    'a=rtpmap:31 H261/90000',
  );

  it('should read session and media connections, rtpmaps, fmtp, ptime and directions per m= line', () => {
    const parsed = offer(text);
    expect(parsed.connection?.address).toBe('192.0.2.10');
    expect(parsed.direction).toBe('sendrecv');
    expect(parsed.media).toHaveLength(2);
    const audio = parsed.media[0];
    expect(audio).toMatchObject({
      type: 'audio',
      port: 49170,
      protocol: 'RTP/AVP',
      formats: ['0', '8', '111', '101'],
      ptime: 30,
      direction: 'sendonly',
    });
    expect(audio?.connection?.address).toBe('192.0.2.11');
    expect(audio?.rtpmaps).toContainEqual({
      payloadType: 111,
      encoding: 'opus',
      clockRate: 48000,
      channels: 2,
    });
    expect(audio?.fmtp[111]).toBe('minptime=10;useinbandfec=1');
    expect(parsed.media[1]?.type).toBe('video');
  });

  it('should round-trip through the serializer', () => {
    const parsed = offer(text);
    expect(offer(serializeSdp(parsed))).toEqual(parsed);
  });

  it.each([
    ['no v=0', sdp('o=- 1 1 IN IP4 h', 's=-')],
    ['no o= line', sdp('v=0', 's=-', 'm=audio 1 RTP/AVP 0')],
    ['a malformed m= line', sdp(...HEAD, 'm=audio port RTP/AVP 0')],
    ['a port above 65535', sdp(...HEAD, 'm=audio 70000 RTP/AVP 0')],
    ['a malformed c= line', sdp(...HEAD, 'c=IN IPX nowhere')],
    ['a malformed rtpmap', sdp(...HEAD, 'm=audio 1 RTP/AVP 96', 'a=rtpmap:96 opus')],
    ['a line without =', sdp(...HEAD, 'garbage')],
  ])('should refuse %s', (_what, text) => {
    expect(parseSdp(text).ok).toBe(false);
  });
});

describe('when answering offers', () => {
  it.each<
    [string, string[], AudioCodecName[], { codec: AudioCodecName; pt: number; dtmf?: number }]
  >([
    [
      'PCMU first in the preference',
      ['m=audio 4000 RTP/AVP 8 0 101', 'a=rtpmap:101 telephone-event/8000'],
      ['PCMU', 'PCMA'],
      { codec: 'PCMU', pt: 0, dtmf: 101 },
    ],
    [
      'PCMA when the tenant prefers it',
      ['m=audio 4000 RTP/AVP 0 8'],
      ['PCMA', 'PCMU'],
      { codec: 'PCMA', pt: 8 },
    ],
    [
      'static payload types without rtpmap',
      ['m=audio 4000 RTP/AVP 8'],
      ['PCMU', 'PCMA'],
      { codec: 'PCMA', pt: 8 },
    ],
    [
      'opus at 48000/2 with a dynamic payload type',
      [
        'm=audio 4000 RTP/AVP 96 0 97',
        'a=rtpmap:96 OPUS/48000/2',
        'a=rtpmap:97 telephone-event/48000',
      ],
      ['opus', 'PCMU'],
      { codec: 'opus', pt: 96, dtmf: 97 },
    ],
    [
      'telephone-event only at the codec clock rate',
      [
        'm=audio 4000 RTP/AVP 96 101',
        'a=rtpmap:96 opus/48000/2',
        'a=rtpmap:101 telephone-event/8000',
      ],
      ['opus'],
      { codec: 'opus', pt: 96 },
    ],
    [
      'the next codec when opus is mono',
      ['m=audio 4000 RTP/AVP 96 0', 'a=rtpmap:96 opus/48000'],
      ['opus', 'PCMU'],
      { codec: 'PCMU', pt: 0 },
    ],
  ])('should choose %s', (_what, mediaLines, preference, expected) => {
    const result = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 192.0.2.10', ...mediaLines)),
      options(preference),
    );
    if (!result.ok) throw new Error(result.detail);
    expect(result.media.codec).toBe(expected.codec);
    expect(result.media.payloadType).toBe(expected.pt);
    expect(result.media.telephoneEvent?.payloadType).toBe(expected.dtmf);
    const answerText = serializeSdp(result.answer);
    const formats = [expected.pt, ...(expected.dtmf !== undefined ? [expected.dtmf] : [])].join(
      ' ',
    );
    expect(answerText).toContain(`m=audio 20000 RTP/AVP ${formats}\r\n`);
    expect(answerText).toContain('c=IN IP4 198.51.100.7\r\n');
    if (expected.dtmf !== undefined) expect(answerText).toContain(`a=fmtp:${expected.dtmf} 0-16`);
  });

  it('should answer with 488 material when nothing is common', () => {
    const result = answerOffer(
      offer(
        sdp(...HEAD, 'c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 18 9', 'a=rtpmap:18 G729/8000'),
      ),
      options(),
    );
    expect(result).toMatchObject({ ok: false, reason: 'no-common-codec' });
  });

  it('should refuse an offer with no usable connection address', () => {
    expect(answerOffer(offer(sdp(...HEAD, 'm=audio 4000 RTP/AVP 0')), options())).toMatchObject({
      ok: false,
      reason: 'bad-sdp',
    });
  });

  it('should refuse an offer with only video', () => {
    expect(
      answerOffer(offer(sdp(...HEAD, 'c=IN IP4 192.0.2.10', 'm=video 4000 RTP/AVP 31')), options()),
    ).toMatchObject({ ok: false, reason: 'bad-sdp' });
  });

  it('should refuse SRTP audio as no common codec', () => {
    expect(
      answerOffer(offer(sdp(...HEAD, 'c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/SAVP 0')), options()),
    ).toMatchObject({ ok: false, reason: 'no-common-codec' });
  });

  it('should keep the order of m= lines and answer non-audio streams with port 0', () => {
    const result = answerOffer(
      offer(
        sdp(
          ...HEAD,
          'c=IN IP4 192.0.2.10',
          'm=video 5000 RTP/AVP 31',
          'm=audio 4000 RTP/AVP 0',
          'm=audio 4002 RTP/AVP 0',
          'm=application 6000 UDP/BFCP *',
        ),
      ),
      options(),
    );
    if (!result.ok) throw new Error(result.detail);
    const lines = serializeSdp(result.answer)
      .split('\r\n')
      .filter((line) => line.startsWith('m='));
    expect(lines).toEqual([
      'm=video 0 RTP/AVP 31',
      'm=audio 20000 RTP/AVP 0',
      'm=audio 0 RTP/AVP 0',
      'm=application 0 UDP/BFCP *',
    ]);
    expect(result.media.remote).toEqual({ address: '192.0.2.10', port: 4000 });
  });

  it.each<[string, string[], string, boolean]>([
    ['sendrecv', ['a=sendrecv'], 'sendrecv', false],
    ['no attribute as sendrecv', [], 'sendrecv', false],
    ['sendonly (hold) with recvonly', ['a=sendonly'], 'recvonly', true],
    ['recvonly with sendonly', ['a=recvonly'], 'sendonly', false],
    ['inactive with inactive', ['a=inactive'], 'inactive', true],
  ])('should mirror %s', (_what, attributes, direction, held) => {
    const result = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 192.0.2.10', 'm=audio 4000 RTP/AVP 0', ...attributes)),
      options(),
    );
    if (!result.ok) throw new Error(result.detail);
    expect(result.media.direction).toBe(direction);
    expect(result.media.held).toBe(held);
    expect(serializeSdp(result.answer)).toContain(`a=${direction}\r\n`);
  });

  it('should treat c=0.0.0.0 (RFC 2543 hold) as held', () => {
    const result = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 0.0.0.0', 'm=audio 4000 RTP/AVP 0')),
      options(),
    );
    expect(result.ok && [result.media.held, result.media.direction]).toEqual([true, 'recvonly']);
  });

  it('should use the session-level direction when the media has none', () => {
    const result = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 192.0.2.10', 'a=inactive', 'm=audio 4000 RTP/AVP 0')),
      options(),
    );
    expect(result.ok && result.media.direction).toBe('inactive');
  });

  it('should carry the offered ptime and default to 20 ms', () => {
    const with30 = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 h', 'm=audio 4000 RTP/AVP 0', 'a=ptime:30')),
      options(),
    );
    const without = answerOffer(
      offer(sdp(...HEAD, 'c=IN IP4 h', 'm=audio 4000 RTP/AVP 0')),
      options(),
    );
    expect(with30.ok && with30.media.ptime).toBe(30);
    expect(without.ok && serializeSdp(without.answer)).toContain('a=ptime:20');
  });

  it('should put the session version in o= so re-answers can increase it', () => {
    const result = answerOffer(offer(sdp(...HEAD, 'c=IN IP4 h', 'm=audio 4000 RTP/AVP 0')), {
      ...options(),
      sessionVersion: 7,
    });
    expect(result.ok && serializeSdp(result.answer)).toContain(
      'o=callgate 42 7 IN IP4 198.51.100.7',
    );
  });
});
