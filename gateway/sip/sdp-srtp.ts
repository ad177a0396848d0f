/**
 * SRTP in offer/answer (RFC 4568 SDES over RTP/SAVP), pure apart from the key source, which is
 * injected: which audio stream a tenant's `srtp` mode lets callgate answer, the crypto line it
 * answers with, the crypto lines it offers for a delayed offer and the keys an answer settles.
 * A fresh master key per answer and per offer, never reused (test/unit/sip/sdp-srtp.test.ts).
 */
import { randomBytes } from 'node:crypto';
import {
  formatCryptoAttribute,
  parseCryptoAttribute,
  SRTP_KEY_SALT_BYTES,
  SRTP_SUITES,
  type SdpCrypto,
  type SrtpSuite,
} from './sdp-crypto.ts';
import type { SdpAttribute, SdpMedia } from './sdp-types.ts';

/** A tenant's SRTP setting: `optional` answers RTP/SAVP and RTP/AVP offers alike. */
export type SrtpMode = 'off' | 'optional' | 'required';

/** The Warning text of a 488 to a plain RTP offer for a tenant whose SRTP is `required`. */
export const SRTP_REQUIRED_WARNING = 'SRTP required';

/** Master key and salt bytes for a new crypto line; crypto.randomBytes unless a test fixes them. */
export type MasterKeySource = (bytes: number) => Uint8Array;

export const randomMasterKey: MasterKeySource = (bytes) => randomBytes(bytes);

/** The keys an exchange settled for the audio stream; the media layer protects with them. */
export interface NegotiatedSrtp {
  readonly suite: SrtpSuite;
  /** Protects what callgate sends: the key of callgate's own crypto line. */
  readonly localKey: Uint8Array;
  /** Checks what the far end sends: its key; absent while callgate's offer awaits the answer. */
  readonly remoteKey?: Uint8Array;
  /** The MKI the far end's packets carry, when its crypto line names one. */
  readonly remoteMki?: Uint8Array;
  /** Packets the far end's key may protect (SRTP and SRTCP together), when its line says. */
  readonly remoteLifetime?: number;
}

const SAVP = 'RTP/SAVP';
const AVP = 'RTP/AVP';

function isActiveAudio(media: SdpMedia, protocol: string): boolean {
  return media.type === 'audio' && media.port !== 0 && media.protocol.toUpperCase() === protocol;
}

/** The crypto lines of a stream, parsed; refused ones carry why. */
function cryptoLines(media: SdpMedia): Array<ReturnType<typeof parseCryptoAttribute>> {
  return media.attributes
    .filter(([name, value]) => name === 'crypto' && value !== null)
    .map(([, value]) => parseCryptoAttribute(value ?? ''));
}

export type AudioStreamChoice =
  | { readonly ok: true; readonly index: number; readonly crypto?: SdpCrypto }
  | {
      readonly ok: false;
      readonly reason: 'no-common-codec' | 'bad-sdp' | 'srtp-required';
      readonly detail: string;
    };

/**
 * The audio stream callgate answers: with SRTP allowed, the first RTP/SAVP stream with a crypto
 * line callgate can run (the offerer's order); else, unless SRTP is required, the first RTP/AVP
 * stream. Other streams are refused with port 0 by the caller of this.
 */
export function chooseAudioStream(media: readonly SdpMedia[], mode: SrtpMode): AudioStreamChoice {
  const refusals: string[] = [];
  if (mode !== 'off') {
    for (const [index, m] of media.entries()) {
      if (!isActiveAudio(m, SAVP)) continue;
      for (const line of cryptoLines(m)) {
        if (line.ok) return { ok: true, index, crypto: line.value };
        refusals.push(line.reason);
      }
      if (refusals.length === 0) refusals.push('an RTP/SAVP stream without a=crypto');
    }
  }
  if (mode !== 'required') {
    const index = media.findIndex((m) => isActiveAudio(m, AVP));
    if (index >= 0) return { ok: true, index };
  }
  if (refusals.length > 0)
    return {
      ok: false,
      reason: 'no-common-codec',
      detail: `no usable a=crypto: ${refusals.join('; ')}`,
    };
  const hasAudio = media.some((m) => m.type === 'audio' && m.port !== 0);
  if (hasAudio && mode === 'required')
    return { ok: false, reason: 'srtp-required', detail: SRTP_REQUIRED_WARNING };
  return hasAudio
    ? {
        ok: false,
        reason: 'no-common-codec',
        detail: `no audio stream over ${mode === 'off' ? AVP : `${AVP} or ${SAVP}`}`,
      }
    : { ok: false, reason: 'bad-sdp', detail: 'the offer has no active audio stream' };
}

/** The answer's crypto line for the offered one (same tag and suite, a fresh key) and its keys. */
export function answerCrypto(
  offered: SdpCrypto,
  newKey: MasterKeySource,
): { readonly attribute: SdpAttribute; readonly srtp: NegotiatedSrtp } {
  const localKey = newKey(SRTP_KEY_SALT_BYTES[offered.suite]);
  return {
    attribute: [
      'crypto',
      formatCryptoAttribute({ tag: offered.tag, suite: offered.suite, keySalt: localKey }),
    ],
    srtp: {
      suite: offered.suite,
      localKey,
      remoteKey: offered.keySalt,
      ...(offered.mki !== undefined && { remoteMki: offered.mki }),
      ...(offered.lifetime !== undefined && { remoteLifetime: offered.lifetime }),
    },
  };
}

/** Callgate's crypto lines for its own offer: every suite, tags from 1, each with its own key. */
export function offerCryptoAttributes(newKey: MasterKeySource): SdpAttribute[] {
  return SRTP_SUITES.map((suite, index) => [
    'crypto',
    formatCryptoAttribute({ tag: index + 1, suite, keySalt: newKey(SRTP_KEY_SALT_BYTES[suite]) }),
  ]);
}

/** The protocol of callgate's own offer. */
export function offerProtocol(mode: SrtpMode): string {
  return mode === 'required' ? SAVP : AVP;
}

/**
 * The keys an answer to callgate's RTP/SAVP offer settles: it must carry exactly one crypto line
 * whose tag and suite callgate offered (RFC 4568 section 7.1.2). Plain RTP offers settle none.
 */
export function acceptAnswerCrypto(
  offered: SdpMedia,
  answered: SdpMedia,
):
  | { readonly ok: true; readonly srtp?: NegotiatedSrtp }
  | { readonly ok: false; readonly detail: string } {
  if (offered.protocol.toUpperCase() !== SAVP) return { ok: true };
  const lines = cryptoLines(answered);
  const line = lines[0];
  if (line === undefined) return { ok: false, detail: 'the answer has no a=crypto' };
  if (lines.length > 1) return { ok: false, detail: 'the answer has more than one a=crypto' };
  if (!line.ok) return { ok: false, detail: `bad a=crypto in the answer: ${line.reason}` };
  const own = cryptoLines(offered).find(
    (mine) => mine.ok && mine.value.tag === line.value.tag && mine.value.suite === line.value.suite,
  );
  if (own === undefined || !own.ok)
    return { ok: false, detail: `the answer's crypto tag ${line.value.tag} was not offered` };
  return {
    ok: true,
    srtp: {
      suite: own.value.suite,
      localKey: own.value.keySalt,
      remoteKey: line.value.keySalt,
      ...(line.value.mki !== undefined && { remoteMki: line.value.mki }),
      ...(line.value.lifetime !== undefined && { remoteLifetime: line.value.lifetime }),
    },
  };
}

/** Before the answer: callgate's first offered line, with no key of the far end yet. */
export function provisionalSrtp(offered: SdpMedia | undefined): NegotiatedSrtp | undefined {
  if (offered === undefined || offered.protocol.toUpperCase() !== SAVP) return undefined;
  const first = cryptoLines(offered)[0];
  return first?.ok === true
    ? { suite: first.value.suite, localKey: first.value.keySalt }
    : undefined;
}
