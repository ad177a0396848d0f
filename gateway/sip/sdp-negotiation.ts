/**
 * SDP offer/answer (RFC 3264) for one audio stream: choose the codec by the tenant's preference
 * among PCMU, PCMA and opus/48000/2 (plus telephone-event at the codec's clock), refuse every
 * other stream with port 0, and mirror the offer's direction. Pure.
 */
import type { LocalMediaAddress } from './local-media.ts';
import type { AudioCodecName, SdpConnection, SdpDirection, SdpMedia, SdpRtpMap, SdpSession } from './sdp-types.ts';

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
}

export type SdpAnswerResult =
  | { readonly ok: true; readonly answer: SdpSession; readonly media: NegotiatedMedia }
  | { readonly ok: false; readonly reason: 'no-common-codec' | 'bad-sdp'; readonly detail: string };

export interface SdpAnswerOptions {
  readonly preference: readonly AudioCodecName[];
  readonly local: LocalMediaAddress;
  /** o= session id, fixed for the dialog. */
  readonly sessionId: string;
  /** o= version, incremented by the dialog with every new answer (RFC 3264 section 8). */
  readonly sessionVersion: number;
  /** Used when the offer names no ptime. */
  readonly defaultPtime?: number;
}

/** 20 ms frames: what G.711 trunks expect by default and what the media layer paces at. */
export const DEFAULT_PTIME_MS = 20;

const STATIC_PAYLOAD: Readonly<Record<number, SdpRtpMap>> = {
  0: { payloadType: 0, encoding: 'PCMU', clockRate: 8000, channels: 1 },
  8: { payloadType: 8, encoding: 'PCMA', clockRate: 8000, channels: 1 },
};

const CODEC_FORMAT: Readonly<Record<AudioCodecName, { encoding: string; clockRate: number; channels: number }>> = {
  PCMU: { encoding: 'pcmu', clockRate: 8000, channels: 1 },
  PCMA: { encoding: 'pcma', clockRate: 8000, channels: 1 },
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

function isRtpAvp(protocol: string): boolean {
  return protocol.toUpperCase() === 'RTP/AVP';
}

export function answerOffer(offer: SdpSession, options: SdpAnswerOptions): SdpAnswerResult {
  const audioIndex = offer.media.findIndex((m) => m.type === 'audio' && m.port !== 0 && isRtpAvp(m.protocol));
  if (audioIndex < 0) {
    const hasAudio = offer.media.some((m) => m.type === 'audio' && m.port !== 0);
    return hasAudio
      ? { ok: false, reason: 'no-common-codec', detail: 'no audio stream over RTP/AVP' }
      : { ok: false, reason: 'bad-sdp', detail: 'the offer has no active audio stream' };
  }
  const audio = offer.media[audioIndex] as SdpMedia;
  const connection: SdpConnection | undefined = audio.connection ?? offer.connection;
  if (connection === undefined) return { ok: false, reason: 'bad-sdp', detail: 'no c= line for the audio stream' };

  let chosen: { codec: AudioCodecName; map: SdpRtpMap } | undefined;
  for (const codec of options.preference) {
    const want = CODEC_FORMAT[codec];
    for (const format of audio.formats) {
      const map = rtpmapOf(audio, format);
      if (map === undefined) continue;
      const channels = map.channels ?? 1;
      if (map.encoding.toLowerCase() === want.encoding && map.clockRate === want.clockRate && channels === want.channels) {
        chosen = { codec, map };
        break;
      }
    }
    if (chosen !== undefined) break;
  }
  if (chosen === undefined) {
    return { ok: false, reason: 'no-common-codec', detail: `offered ${audio.formats.join(' ')}, accepted ${options.preference.join(' ')}` };
  }
  const clockRate = chosen.map.clockRate;
  const dtmf = audio.formats
    .map((format) => rtpmapOf(audio, format))
    .find((map) => map !== undefined && map.encoding.toLowerCase() === 'telephone-event' && map.clockRate === clockRate);

  const offeredDirection = audio.direction ?? offer.direction ?? 'sendrecv';
  const nullAddress = connection.address === '0.0.0.0' || connection.address === '::';
  const held = nullAddress || offeredDirection === 'sendonly' || offeredDirection === 'inactive';
  const direction: SdpDirection = nullAddress && offeredDirection === 'sendrecv' ? 'recvonly' : MIRROR[offeredDirection];
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
  const addrType = options.local.address.includes(':') ? 'IP6' : 'IP4';
  const answerMedia: SdpMedia[] = offer.media.map((m, index) => {
    if (index === audioIndex) {
      return { type: 'audio', port: options.local.port, protocol: audio.protocol, formats, rtpmaps, fmtp, ptime, direction, attributes: [] };
    }
    // RFC 3264 section 6: a refused stream keeps its place with port 0 and the offered formats.
    return { type: m.type, port: 0, protocol: m.protocol, formats: m.formats.length > 0 ? [...m.formats] : ['0'], rtpmaps: [], fmtp: {}, attributes: [] };
  });
  const answer: SdpSession = {
    origin: { username: 'callgate', sessionId: options.sessionId, sessionVersion: String(options.sessionVersion), netType: 'IN', addrType, address: options.local.address },
    sessionName: 'callgate',
    connection: { netType: 'IN', addrType, address: options.local.address },
    attributes: [],
    media: answerMedia,
  };
  return {
    ok: true,
    answer,
    media: {
      codec: chosen.codec,
      payloadType: chosen.map.payloadType,
      clockRate,
      channels: chosen.map.channels ?? 1,
      ...(dtmf !== undefined ? { telephoneEvent: { payloadType: dtmf.payloadType, clockRate: dtmf.clockRate } } : {}),
      ptime,
      remote: { address: connection.address, port: audio.port },
      direction,
      held,
    },
  };
}
