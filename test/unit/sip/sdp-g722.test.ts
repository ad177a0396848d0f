/**
 * G.722 in offer/answer: G722/8000 (static payload type 9; the 8000 is the RTP clock, the audio
 * is 16 kHz, RFC 3551 §4.5.2) chosen only for tenants that list it, with telephone-event/8000
 * beside it. Pure.
 */
import { describe, expect, it } from 'vitest';
import { provisionalMedia } from '../../../gateway/sip/delayed-offer.ts';
import { acceptAnswer, answerOffer, buildOffer } from '../../../gateway/sip/sdp-negotiation.ts';
import { parseSdp, serializeSdp } from '../../../gateway/sip/sdp-parser.ts';
import type { AudioCodecName, SdpSession } from '../../../gateway/sip/sdp-types.ts';

const local = { address: '198.51.100.7', port: 20_000 };

function sdp(...lines: string[]): SdpSession {
  const parsed = parseSdp(
    `${['v=0', 'o=- 1 1 IN IP4 192.0.2.10', 's=-', 't=0 0', 'c=IN IP4 192.0.2.10', ...lines].join('\r\n')}\r\n`,
  );
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
}

const answer = (offer: SdpSession, preference: AudioCodecName[]) =>
  answerOffer(offer, { preference, local, sessionId: '42', sessionVersion: 1 });

/** What baresip offers with its g722, g711 and opus modules loaded. */
const WIDEBAND_PHONE = [
  'm=audio 4000 RTP/AVP 9 111 0 8 101',
  'a=rtpmap:9 G722/8000',
  'a=rtpmap:111 opus/48000/2',
  'a=rtpmap:0 PCMU/8000',
  'a=rtpmap:8 PCMA/8000',
  'a=rtpmap:101 telephone-event/8000',
  'a=fmtp:101 0-15',
];

describe('when answering an offer with G.722', () => {
  it('should choose G722/8000 on payload type 9 with telephone-event/8000 for a tenant that lists it first', () => {
    const result = answer(sdp(...WIDEBAND_PHONE), ['G722', 'PCMU']);
    if (!result.ok) throw new Error(result.detail);
    expect(result.media).toMatchObject({
      codec: 'G722',
      payloadType: 9,
      clockRate: 8000,
      channels: 1,
      telephoneEvent: { payloadType: 101, clockRate: 8000 },
    });
    const text = serializeSdp(result.answer);
    expect(text).toContain('\r\nm=audio 20000 RTP/AVP 9 101\r\n');
    expect(text).toContain('\r\na=rtpmap:9 G722/8000\r\n');
    expect(text).toContain('\r\na=rtpmap:101 telephone-event/8000\r\n');
    expect(text).toContain('\r\na=fmtp:101 0-15\r\n');
  });

  it('should take payload type 9 without an rtpmap as G.722', () => {
    const result = answer(sdp('m=audio 4000 RTP/AVP 9'), ['G722']);
    expect(result.ok && result.media.codec).toBe('G722');
  });

  it('should keep to the tenant’s codecs: without G722 listed, the phone’s G.722 is passed over', () => {
    const result = answer(sdp(...WIDEBAND_PHONE), ['PCMU', 'PCMA', 'opus']);
    expect(result.ok && result.media.codec).toBe('PCMU');
    const g722Only = answer(sdp('m=audio 4000 RTP/AVP 9'), ['PCMU', 'PCMA', 'opus']);
    expect(g722Only.ok ? g722Only.media.codec : g722Only.reason).toBe('no-common-codec');
  });

  it('should refuse G722 at another clock rate (no such codec)', () => {
    const result = answer(sdp('m=audio 4000 RTP/AVP 96', 'a=rtpmap:96 G722/16000'), ['G722']);
    expect(result.ok).toBe(false);
  });
});

describe('when callgate offers G.722 (an INVITE without SDP)', () => {
  const offer = buildOffer({
    preference: ['G722', 'PCMU'],
    local,
    sessionId: '1',
    sessionVersion: 1,
  });

  it('should offer payload type 9 as G722/8000 and telephone-event/8000 once for both 8 kHz clocks', () => {
    const text = serializeSdp(offer);
    expect(text).toContain('\r\nm=audio 20000 RTP/AVP 9 0 101\r\n');
    expect(text).toContain('\r\na=rtpmap:9 G722/8000\r\n');
    expect(text).toContain('\r\na=rtpmap:101 telephone-event/8000\r\n');
  });

  it('should settle G.722 with DTMF from an answer that keeps it', () => {
    const result = acceptAnswer(
      offer,
      sdp(
        'm=audio 4000 RTP/AVP 9 101',
        'a=rtpmap:9 G722/8000',
        'a=rtpmap:101 telephone-event/8000',
      ),
    );
    if (!result.ok) throw new Error(result.detail);
    expect(result.media).toMatchObject({
      codec: 'G722',
      payloadType: 9,
      clockRate: 8000,
      telephoneEvent: { payloadType: 101 },
    });
  });

  it('should open the provisional media with G.722 before the answer names a port', () => {
    expect(provisionalMedia(offer, '192.0.2.10')).toMatchObject({
      codec: 'G722',
      payloadType: 9,
      clockRate: 8000,
      telephoneEvent: { payloadType: 101, clockRate: 8000 },
    });
  });
});
