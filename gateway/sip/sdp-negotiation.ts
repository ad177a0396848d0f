/**
 * SDP offer/answer (RFC 3264) for one audio stream, pure. As answerer (`answerOffer`): choose the
 * codec by the tenant's preference among PCMU, PCMA, G722/8000 and opus/48000/2 (plus
 * telephone-event at the codec's clock: 8000 for G.722 too, whose RTP clock is 8 kHz), refuse every other stream with port 0, and mirror the offer's direction. As
 * offerer, for an INVITE that came without SDP (`buildOffer` for the 200, `acceptAnswer` for the
 * SDP in the ACK): offer the tenant's codecs in its order and check that the answer keeps to them.
 * SRTP by the tenant's `srtp` mode (sdp-srtp.ts): an RTP/SAVP stream is answered with one crypto
 * line and a fresh key, and the keys travel in `NegotiatedMedia.srtp`.
 */
import type { LocalMediaAddress } from './local-media.ts';
import {
  acceptAnswerCrypto,
  answerCrypto,
  chooseAudioStream,
  offerCryptoAttributes,
  offerProtocol,
  randomMasterKey,
  type MasterKeySource,
  type NegotiatedSrtp,
  type SrtpMode,
} from './sdp-srtp.ts';
import type {
  AudioCodecName,
  SdpConnection,
  SdpDirection,
  SdpMedia,
  SdpRtpMap,
  SdpSession,
} from './sdp-types.ts';

/** What the negotiation settled for the audio stream; the media layer runs RTP from it. */
export interface NegotiatedMedia {
  readonly codec: AudioCodecName;
  readonly payloadType: number;
  readonly clockRate: number;
  readonly channels: number;
  /** RFC 4733 DTMF, when the offer has telephone-event at the codec's clock rate. */
  readonly telephoneEvent?: { readonly payloadType: number; readonly clockRate: number };
  readonly ptime: number;
  /** Where the caller receives RTP. Port 0 never occurs here: such streams are not chosen. */
  readonly remote: { readonly address: string; readonly port: number };
  /** Callgate's direction in the answer (the mirror of the offer's). */
  readonly direction: SdpDirection;
  /** The caller put the call on hold (sendonly/inactive offer, or the RFC 2543 c=0.0.0.0). */
  readonly held: boolean;
  /** SRTP keys when the stream is RTP/SAVP (sdp-srtp.ts); plain RTP without. */
  readonly srtp?: NegotiatedSrtp;
}

export type SdpAnswerResult =
  | { readonly ok: true; readonly answer: SdpSession; readonly media: NegotiatedMedia }
  | {
      readonly ok: false;
      readonly reason: 'no-common-codec' | 'bad-sdp' | 'srtp-required';
      readonly detail: string;
    };

export interface SdpAnswerOptions {
  readonly preference: readonly AudioCodecName[];
  readonly local: LocalMediaAddress;
  /** o= session id, fixed for the dialog. */
  readonly sessionId: string;
  /** o= version, incremented by the dialog with every new answer (RFC 3264 section 8). */
  readonly sessionVersion: number;
  /** Used when the offer names no ptime. */
  readonly defaultPtime?: number;
  /** The tenant's SRTP mode; `off` when omitted. */
  readonly srtp?: SrtpMode;
  /** Where a new crypto line's key comes from; crypto.randomBytes when omitted. */
  readonly masterKey?: MasterKeySource;
}

/** 20 ms frames: what G.711 trunks expect by default and what the media layer paces at. */
export const DEFAULT_PTIME_MS = 20;

const STATIC_PAYLOAD: Readonly<Record<number, SdpRtpMap>> = {
  0: { payloadType: 0, encoding: 'PCMU', clockRate: 8000, channels: 1 },
  8: { payloadType: 8, encoding: 'PCMA', clockRate: 8000, channels: 1 },
  9: { payloadType: 9, encoding: 'G722', clockRate: 8000, channels: 1 },
};

const CODEC_FORMAT: Readonly<
  Record<AudioCodecName, { encoding: string; clockRate: number; channels: number }>
> = {
  PCMU: { encoding: 'pcmu', clockRate: 8000, channels: 1 },
  PCMA: { encoding: 'pcma', clockRate: 8000, channels: 1 },
  G722: { encoding: 'g722', clockRate: 8000, channels: 1 },
  opus: { encoding: 'opus', clockRate: 48000, channels: 2 },
};

const MIRROR: Readonly<Record<SdpDirection, SdpDirection>> = {
  sendrecv: 'sendrecv',
  sendonly: 'recvonly',
  recvonly: 'sendonly',
  inactive: 'inactive',
};

function rtpmapOf(media: SdpMedia, format: string): SdpRtpMap | undefined {
  if (!/^\d{1,3}$/.test(format)) return undefined;
  const pt = Number(format);
  return media.rtpmaps.find((map) => map.payloadType === pt) ?? STATIC_PAYLOAD[pt];
}

export function answerOffer(offer: SdpSession, options: SdpAnswerOptions): SdpAnswerResult {
  const stream = chooseAudioStream(offer.media, options.srtp ?? 'off');
  if (!stream.ok) return stream;
  const audioIndex = stream.index;
  const audio = offer.media[audioIndex] as SdpMedia;
  const connection: SdpConnection | undefined = audio.connection ?? offer.connection;
  if (connection === undefined)
    return { ok: false, reason: 'bad-sdp', detail: 'no c= line for the audio stream' };

  let chosen: { codec: AudioCodecName; map: SdpRtpMap } | undefined;
  for (const codec of options.preference) {
    const want = CODEC_FORMAT[codec];
    for (const format of audio.formats) {
      const map = rtpmapOf(audio, format);
      if (map === undefined) continue;
      const channels = map.channels ?? 1;
      if (
        map.encoding.toLowerCase() === want.encoding &&
        map.clockRate === want.clockRate &&
        channels === want.channels
      ) {
        chosen = { codec, map };
        break;
      }
    }
    if (chosen !== undefined) break;
  }
  if (chosen === undefined) {
    return {
      ok: false,
      reason: 'no-common-codec',
      detail: `offered ${audio.formats.join(' ')}, accepted ${options.preference.join(' ')}`,
    };
  }
  const clockRate = chosen.map.clockRate;
  const dtmf = audio.formats
    .map((format) => rtpmapOf(audio, format))
    .find(
      (map) =>
        map !== undefined &&
        map.encoding.toLowerCase() === 'telephone-event' &&
        map.clockRate === clockRate,
    );

  const offeredDirection = audio.direction ?? offer.direction ?? 'sendrecv';
  const nullAddress = connection.address === '0.0.0.0' || connection.address === '::';
  const held = nullAddress || offeredDirection === 'sendonly' || offeredDirection === 'inactive';
  const direction: SdpDirection =
    nullAddress && offeredDirection === 'sendrecv' ? 'recvonly' : MIRROR[offeredDirection];
  const ptime = audio.ptime ?? options.defaultPtime ?? DEFAULT_PTIME_MS;

  const fmtp: Record<number, string> = {};
  const offeredCodecFmtp = audio.fmtp[chosen.map.payloadType];
  if (chosen.codec === 'opus') fmtp[chosen.map.payloadType] = offeredCodecFmtp ?? 'useinbandfec=1';
  const rtpmaps: SdpRtpMap[] = [chosen.map];
  const formats = [String(chosen.map.payloadType)];
  if (dtmf !== undefined) {
    rtpmaps.push(dtmf);
    formats.push(String(dtmf.payloadType));
    fmtp[dtmf.payloadType] = audio.fmtp[dtmf.payloadType] ?? '0-16';
  }
  const crypto =
    stream.crypto === undefined
      ? undefined
      : answerCrypto(stream.crypto, options.masterKey ?? randomMasterKey);
  const addrType = options.local.address.includes(':') ? 'IP6' : 'IP4';
  const answerMedia: SdpMedia[] = offer.media.map((m, index) => {
    if (index === audioIndex) {
      return {
        type: 'audio',
        port: options.local.port,
        protocol: audio.protocol,
        formats,
        rtpmaps,
        fmtp,
        ptime,
        direction,
        attributes: crypto === undefined ? [] : [crypto.attribute],
      };
    }
    // RFC 3264 section 6: a refused stream keeps its place with port 0 and the offered formats.
    return {
      type: m.type,
      port: 0,
      protocol: m.protocol,
      formats: m.formats.length > 0 ? [...m.formats] : ['0'],
      rtpmaps: [],
      fmtp: {},
      attributes: [],
    };
  });
  const answer: SdpSession = {
    origin: {
      username: 'callgate',
      sessionId: options.sessionId,
      sessionVersion: String(options.sessionVersion),
      netType: 'IN',
      addrType,
      address: options.local.address,
    },
    sessionName: 'callgate',
    connection: { netType: 'IN', addrType, address: options.local.address },
    attributes: [],
    media: answerMedia,
  };
  return {
    ok: true,
    answer,
    media: negotiatedMedia(
      chosen,
      dtmf,
      ptime,
      { address: connection.address, port: audio.port },
      direction,
      held,
      crypto?.srtp,
    ),
  };
}

/** Dynamic payload types callgate offers (the values most trunks and phones use themselves). */
export const OFFER_PAYLOAD_TYPES = {
  opus: 111,
  telephoneEvent8000: 101,
  telephoneEvent48000: 110,
} as const;

export interface SdpOfferOptions {
  readonly preference: readonly AudioCodecName[];
  readonly local: LocalMediaAddress;
  readonly sessionId: string;
  readonly sessionVersion: number;
  readonly ptime?: number;
  /** `required`: the offer is RTP/SAVP with a crypto line per suite; plain RTP/AVP otherwise. */
  readonly srtp?: SrtpMode;
  readonly masterKey?: MasterKeySource;
}

/**
 * The offer callgate puts in the 200 to an INVITE without SDP (RFC 3261 section 13.2.1): one
 * sendrecv audio stream with the tenant's codecs in its order of preference and telephone-event
 * at each clock rate offered.
 */
export function buildOffer(options: SdpOfferOptions): SdpSession {
  const rtpmaps: SdpRtpMap[] = [];
  const fmtp: Record<number, string> = {};
  for (const codec of new Set(options.preference)) {
    if (codec === 'PCMU') rtpmaps.push({ payloadType: 0, encoding: 'PCMU', clockRate: 8000 });
    if (codec === 'PCMA') rtpmaps.push({ payloadType: 8, encoding: 'PCMA', clockRate: 8000 });
    if (codec === 'G722') rtpmaps.push({ payloadType: 9, encoding: 'G722', clockRate: 8000 });
    if (codec === 'opus') {
      rtpmaps.push({
        payloadType: OFFER_PAYLOAD_TYPES.opus,
        encoding: 'opus',
        clockRate: 48000,
        channels: 2,
      });
      fmtp[OFFER_PAYLOAD_TYPES.opus] = 'useinbandfec=1';
    }
  }
  if (rtpmaps.some((map) => map.clockRate === 8000)) {
    rtpmaps.push({
      payloadType: OFFER_PAYLOAD_TYPES.telephoneEvent8000,
      encoding: 'telephone-event',
      clockRate: 8000,
    });
    fmtp[OFFER_PAYLOAD_TYPES.telephoneEvent8000] = '0-16';
  }
  if (rtpmaps.some((map) => map.clockRate === 48000)) {
    rtpmaps.push({
      payloadType: OFFER_PAYLOAD_TYPES.telephoneEvent48000,
      encoding: 'telephone-event',
      clockRate: 48000,
    });
    fmtp[OFFER_PAYLOAD_TYPES.telephoneEvent48000] = '0-16';
  }
  const addrType = options.local.address.includes(':') ? 'IP6' : 'IP4';
  return {
    origin: {
      username: 'callgate',
      sessionId: options.sessionId,
      sessionVersion: String(options.sessionVersion),
      netType: 'IN',
      addrType,
      address: options.local.address,
    },
    sessionName: 'callgate',
    connection: { netType: 'IN', addrType, address: options.local.address },
    attributes: [],
    media: [
      {
        type: 'audio',
        port: options.local.port,
        protocol: offerProtocol(options.srtp ?? 'off'),
        formats: rtpmaps.map((map) => String(map.payloadType)),
        rtpmaps,
        fmtp,
        ptime: options.ptime ?? DEFAULT_PTIME_MS,
        direction: 'sendrecv',
        attributes:
          options.srtp === 'required'
            ? offerCryptoAttributes(options.masterKey ?? randomMasterKey)
            : [],
      },
    ],
  };
}

function sameCodec(a: SdpRtpMap, b: SdpRtpMap): boolean {
  return (
    a.encoding.toLowerCase() === b.encoding.toLowerCase() &&
    a.clockRate === b.clockRate &&
    (a.channels ?? 1) === (b.channels ?? 1)
  );
}

/**
 * Checks the answer to callgate's offer (carried by the ACK) and settles the media: the answer
 * must have one m= line per offered line (RFC 3264 section 6), keep the audio stream, and pick a
 * codec callgate offered; the codec is the first of the answer's formats that callgate offered.
 * Anything else is refused, and the dialog ends the call (RFC 3261 section 13.3.1.4).
 */
export function acceptAnswer(
  offer: SdpSession,
  answer: SdpSession,
):
  { readonly ok: true; readonly media: NegotiatedMedia } | Extract<SdpAnswerResult, { ok: false }> {
  if (answer.media.length !== offer.media.length) {
    return {
      ok: false,
      reason: 'bad-sdp',
      detail: `the answer has ${answer.media.length} m= lines for ${offer.media.length} offered`,
    };
  }
  const audioIndex = offer.media.findIndex((m) => m.type === 'audio' && m.port !== 0);
  const offered = offer.media[audioIndex];
  const audio = answer.media[audioIndex];
  if (offered === undefined || audio === undefined)
    return { ok: false, reason: 'bad-sdp', detail: 'the offer has no audio stream' };
  if (
    audio.type !== offered.type ||
    audio.protocol.toUpperCase() !== offered.protocol.toUpperCase()
  ) {
    return {
      ok: false,
      reason: 'bad-sdp',
      detail: `answered ${audio.type} ${audio.protocol} for the offered ${offered.type} ${offered.protocol}`,
    };
  }
  if (audio.port === 0)
    return {
      ok: false,
      reason: 'no-common-codec',
      detail: 'the answer refused the audio stream (port 0)',
    };
  const connection = audio.connection ?? answer.connection;
  if (connection === undefined)
    return { ok: false, reason: 'bad-sdp', detail: 'no c= line for the audio stream' };
  const crypto = acceptAnswerCrypto(offered, audio);
  if (!crypto.ok) return { ok: false, reason: 'bad-sdp', detail: crypto.detail };

  const offeredMaps = offered.formats
    .map((format) => rtpmapOf(offered, format))
    .filter((map): map is SdpRtpMap => map !== undefined);
  const offeredCodec = (map: SdpRtpMap): AudioCodecName | undefined =>
    offeredMaps.some((own) => sameCodec(own, map))
      ? (Object.keys(CODEC_FORMAT) as AudioCodecName[]).find((name) =>
          sameCodec({ payloadType: 0, ...CODEC_FORMAT[name] }, map),
        )
      : undefined;
  let chosen: { codec: AudioCodecName; map: SdpRtpMap } | undefined;
  for (const format of audio.formats) {
    const map = rtpmapOf(audio, format);
    const codec = map === undefined ? undefined : offeredCodec(map);
    if (map !== undefined && codec !== undefined) {
      chosen = { codec, map };
      break;
    }
  }
  if (chosen === undefined)
    return {
      ok: false,
      reason: 'no-common-codec',
      detail: `answered ${audio.formats.join(' ')}, offered ${offered.formats.join(' ')}`,
    };
  const clockRate = chosen.map.clockRate;
  const dtmf = audio.formats
    .map((format) => rtpmapOf(audio, format))
    .find(
      (map) =>
        map !== undefined &&
        map.encoding.toLowerCase() === 'telephone-event' &&
        map.clockRate === clockRate &&
        offeredMaps.some((own) => sameCodec(own, map)),
    );
  const answeredDirection = audio.direction ?? answer.direction ?? 'sendrecv';
  const nullAddress = connection.address === '0.0.0.0' || connection.address === '::';
  return {
    ok: true,
    media: negotiatedMedia(
      chosen,
      dtmf,
      audio.ptime ?? offered.ptime ?? DEFAULT_PTIME_MS,
      { address: connection.address, port: audio.port },
      nullAddress && answeredDirection === 'sendrecv' ? 'recvonly' : MIRROR[answeredDirection],
      nullAddress || answeredDirection === 'sendonly' || answeredDirection === 'inactive',
      crypto.srtp,
    ),
  };
}

/** The media an offer/answer exchange settled, from the chosen codec and what surrounds it. */
function negotiatedMedia(
  chosen: { codec: AudioCodecName; map: SdpRtpMap },
  dtmf: SdpRtpMap | undefined,
  ptime: number,
  remote: NegotiatedMedia['remote'],
  direction: NegotiatedMedia['direction'],
  held: boolean,
  srtp: NegotiatedSrtp | undefined,
): NegotiatedMedia {
  return {
    codec: chosen.codec,
    payloadType: chosen.map.payloadType,
    clockRate: chosen.map.clockRate,
    channels: chosen.map.channels ?? 1,
    ...(dtmf !== undefined
      ? { telephoneEvent: { payloadType: dtmf.payloadType, clockRate: dtmf.clockRate } }
      : {}),
    ptime,
    remote,
    direction,
    held,
    ...(srtp !== undefined && { srtp }),
  };
}
