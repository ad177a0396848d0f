/**
 * SRTP in offer/answer by the tenant's mode: which streams callgate answers, the crypto line it
 * answers with (a fresh key per answer), refusals (488 reasons), callgate's own RTP/SAVP offer
 * for a delayed offer and the keys its answer settles. Pure; keys come from a counter.
 */
import { describe, expect, it } from 'vitest';
import { provisionalMedia } from '../../../gateway/sip/delayed-offer.ts';
import { parseCryptoAttribute } from '../../../gateway/sip/sdp-crypto.ts';
import { acceptAnswer, answerOffer, buildOffer } from '../../../gateway/sip/sdp-negotiation.ts';
import { parseSdp, serializeSdp } from '../../../gateway/sip/sdp-parser.ts';
import type { SrtpMode } from '../../../gateway/sip/sdp-srtp.ts';
import type { SdpSession } from '../../../gateway/sip/sdp-types.ts';

const local = { address: '198.51.100.7', port: 20_000 };
const theirKey = Buffer.alloc(30, 0x11);
const theirGcmKey = Buffer.alloc(28, 0x22);
const crypto80 = `a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${theirKey.toString('base64')}`;

/** Keys 0x01.., 0x02.., one fill byte per key asked for. */
function countingKeys(): (bytes: number) => Uint8Array {
  let n = 0;
  return (bytes) => Buffer.alloc(bytes, ++n);
}

function sdp(...lines: string[]): SdpSession {
  const parsed = parseSdp(
    `${['v=0', 'o=- 1 1 IN IP4 192.0.2.10', 's=-', 'c=IN IP4 192.0.2.10', 't=0 0', ...lines].join('\r\n')}\r\n`,
  );
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
}

const answer = (offer: SdpSession, srtp: SrtpMode, masterKey = countingKeys()) =>
  answerOffer(offer, {
    preference: ['PCMU'],
    local,
    sessionId: '1',
    sessionVersion: 1,
    srtp,
    masterKey,
  });

const savp = sdp('m=audio 4000 RTP/SAVP 0 101', 'a=rtpmap:101 telephone-event/8000', crypto80);
const avp = sdp('m=audio 4000 RTP/AVP 0');

describe('when a tenant answers by its srtp mode', () => {
  it.each<[SrtpMode, SdpSession, 'RTP/SAVP' | 'RTP/AVP' | 488]>([
    ['off', avp, 'RTP/AVP'],
    ['off', savp, 488],
    ['optional', avp, 'RTP/AVP'],
    ['optional', savp, 'RTP/SAVP'],
    ['required', savp, 'RTP/SAVP'],
    ['required', avp, 488],
  ])('should answer %s to %#: %s', (mode, offer, expected) => {
    const result = answer(offer, mode);
    if (expected === 488) return expect(result.ok).toBe(false);
    expect(result.ok && result.answer.media[0]?.protocol).toBe(expected);
    expect(result.ok && result.media.srtp !== undefined).toBe(expected === 'RTP/SAVP');
  });

  it('should refuse a plain offer to a required tenant with the SRTP-required reason', () => {
    expect(answer(avp, 'required')).toEqual({
      ok: false,
      reason: 'srtp-required',
      detail: 'SRTP required',
    });
  });

  it('should answer with one crypto line: the offered tag and suite, a fresh key', () => {
    const result = answer(savp, 'required');
    if (!result.ok) throw new Error(result.detail);
    const lines = result.answer.media[0]?.attributes.filter(([name]) => name === 'crypto') ?? [];
    expect(lines).toEqual([
      ['crypto', `1 AES_CM_128_HMAC_SHA1_80 inline:${Buffer.alloc(30, 1).toString('base64')}`],
    ]);
    expect(result.media.srtp).toEqual({
      suite: 'AES_CM_128_HMAC_SHA1_80',
      localKey: Buffer.alloc(30, 1),
      remoteKey: theirKey,
    });
  });

  it('should use a new key for every answer (one key source call each)', () => {
    const keys = countingKeys();
    const first = answer(savp, 'optional', keys);
    const second = answer(savp, 'optional', keys);
    expect(
      first.ok &&
        second.ok &&
        Buffer.compare(first.media.srtp!.localKey, second.media.srtp!.localKey),
    ).not.toBe(0);
  });

  it('should take the first crypto line it can run, in the offerer order', () => {
    const offer = sdp(
      'm=audio 4000 RTP/SAVP 0',
      'a=crypto:1 AES_256_CM_HMAC_SHA1_80 inline:' + Buffer.alloc(46).toString('base64'),
      'a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:bad*base64',
      `a=crypto:3 AEAD_AES_128_GCM inline:${theirGcmKey.toString('base64')}`,
      crypto80.replace('crypto:1', 'crypto:4'),
    );
    const result = answer(offer, 'required');
    expect(result.ok && result.media.srtp?.suite).toBe('AEAD_AES_128_GCM');
    const line = result.ok ? result.answer.media[0]?.attributes[0]?.[1] : undefined;
    expect(line).toMatch(/^3 AEAD_AES_128_GCM inline:/);
    expect(parseCryptoAttribute(line ?? '').ok).toBe(true);
  });

  it('should refuse an RTP/SAVP offer whose crypto lines it cannot run, saying why but not the key', () => {
    const offer = sdp('m=audio 4000 RTP/SAVP 0', `${crypto80}|2^20|1:129`);
    const result = answer(offer, 'required');
    expect(result.ok ? undefined : [result.reason, result.detail]).toEqual([
      'no-common-codec',
      expect.stringMatching(/bad MKI/) as unknown,
    ]);
    expect(!result.ok && result.detail).not.toContain(theirKey.toString('base64'));
  });

  it("should keep the far end's MKI and key lifetime for its packets and answer without one of its own", () => {
    const offer = sdp('m=audio 4000 RTP/SAVP 0', `${crypto80}|2^31|7:2`);
    const result = answer(offer, 'required');
    expect(result.ok && [...(result.media.srtp?.remoteMki ?? [])]).toEqual([0, 7]);
    expect(result.ok && result.media.srtp?.remoteLifetime).toBe(2 ** 31);
    const line = result.ok ? result.answer.media[0]?.attributes[0]?.[1] : undefined;
    expect(line).toMatch(/^1 AES_CM_128_HMAC_SHA1_80 inline:[A-Za-z0-9+/=]+$/);
  });

  it('should refuse an RTP/SAVP stream without any crypto line', () => {
    expect(answer(sdp('m=audio 4000 RTP/SAVP 0'), 'required')).toMatchObject({ ok: false });
  });

  it('should prefer the RTP/SAVP stream of a best-effort offer (SAVP and AVP lines) and refuse the other', () => {
    const offer = sdp('m=audio 4000 RTP/AVP 0', 'm=audio 4002 RTP/SAVP 0', crypto80);
    const result = answer(offer, 'optional');
    if (!result.ok) throw new Error(result.detail);
    expect(result.answer.media.map((m) => [m.protocol, m.port])).toEqual([
      ['RTP/AVP', 0],
      ['RTP/SAVP', 20_000],
    ]);
    expect(result.media.remote.port).toBe(4002);
  });

  it('should answer the plain stream of a best-effort offer for a tenant with SRTP off', () => {
    const offer = sdp('m=audio 4000 RTP/AVP 0', 'm=audio 4002 RTP/SAVP 0', crypto80);
    const result = answer(offer, 'off');
    expect(result.ok && result.media.srtp).toBeUndefined();
    expect(result.ok && result.media.remote.port).toBe(4000);
  });

  it('should ignore crypto lines on a plain RTP/AVP stream', () => {
    const result = answer(sdp('m=audio 4000 RTP/AVP 0', crypto80), 'optional');
    expect(result.ok && result.media.srtp).toBeUndefined();
    expect(result.ok && result.answer.media[0]?.attributes).toEqual([]);
  });
});

describe('when callgate offers for a delayed offer', () => {
  const offer = (srtp: SrtpMode): SdpSession =>
    buildOffer({
      preference: ['PCMU'],
      local,
      sessionId: '9',
      sessionVersion: 1,
      srtp,
      masterKey: countingKeys(),
    });

  it('should offer RTP/SAVP with a crypto line per suite, each with its own key, when required', () => {
    const text = serializeSdp(offer('required'));
    expect(text).toContain('m=audio 20000 RTP/SAVP 0 101\r\n');
    expect(text).toContain(
      `a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${Buffer.alloc(30, 1).toString('base64')}\r\n`,
    );
    expect(text).toContain(
      `a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:${Buffer.alloc(30, 2).toString('base64')}\r\n`,
    );
    expect(text).toContain(
      `a=crypto:3 AEAD_AES_128_GCM inline:${Buffer.alloc(28, 3).toString('base64')}\r\n`,
    );
  });

  it.each<SrtpMode>(['off', 'optional'])('should offer plain RTP/AVP when SRTP is %s', (mode) => {
    const text = serializeSdp(offer(mode));
    expect(text).toContain('m=audio 20000 RTP/AVP 0 101\r\n');
    expect(text).not.toContain('a=crypto');
  });

  it('should settle the keys of the tag the answer chose', () => {
    const own = offer('required');
    const theirs = sdp(
      'm=audio 4000 RTP/SAVP 0',
      crypto80.replace('crypto:1 AES_CM_128_HMAC_SHA1_80', 'crypto:2 AES_CM_128_HMAC_SHA1_32'),
    );
    const settled = acceptAnswer(own, theirs);
    expect(settled.ok && settled.media.srtp).toEqual({
      suite: 'AES_CM_128_HMAC_SHA1_32',
      localKey: Buffer.alloc(30, 2),
      remoteKey: theirKey,
    });
  });

  it.each<[string, string[], RegExp]>([
    ['no crypto line', ['m=audio 4000 RTP/SAVP 0'], /no a=crypto/],
    [
      'a tag not offered',
      ['m=audio 4000 RTP/SAVP 0', crypto80.replace('crypto:1', 'crypto:9')],
      /tag 9 was not offered/,
    ],
    [
      'a suite other than the tag',
      ['m=audio 4000 RTP/SAVP 0', crypto80.replace('crypto:1', 'crypto:3')],
      /not offered/,
    ],
    ['two crypto lines', ['m=audio 4000 RTP/SAVP 0', crypto80, crypto80], /more than one/],
    [
      'a bad key',
      ['m=audio 4000 RTP/SAVP 0', 'a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAAA'],
      /bad a=crypto/,
    ],
    ['a plain answer', ['m=audio 4000 RTP/AVP 0'], /RTP\/AVP/],
  ])('should refuse an answer with %s', (_what, lines, detail) => {
    const settled = acceptAnswer(offer('required'), sdp(...lines));
    expect(settled.ok ? undefined : settled.detail).toMatch(detail);
  });

  it('should hold only callgate own key until the answer comes', () => {
    const media = provisionalMedia(offer('required'), '192.0.2.10');
    expect(media.srtp).toEqual({ suite: 'AES_CM_128_HMAC_SHA1_80', localKey: Buffer.alloc(30, 1) });
    expect(provisionalMedia(offer('off'), '192.0.2.10').srtp).toBeUndefined();
  });
});
