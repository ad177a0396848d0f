/**
 * The SDES `a=crypto` attribute (RFC 4568 section 9.1) for SRTP, pure: parsed from an offer or an
 * answer, written into callgate's own. Only what callgate can run is accepted: one inline master
 * key of the suite's exact length (with a lifetime and an MKI, or not), no session parameter that
 * weakens or changes SRTP (a window size hint is read and ignored). Everything else is a typed refusal naming why, and
 * the offer's next crypto line is tried (test/unit/sip/sdp-crypto.test.ts).
 *
 * Key material lives in `keySalt`; `formatCryptoAttribute` is the only writer of it to text.
 */

/** SRTP crypto suites callgate negotiates, in its own order of preference. */
export const SRTP_SUITES = [
  'AES_CM_128_HMAC_SHA1_80',
  'AES_CM_128_HMAC_SHA1_32',
  'AEAD_AES_128_GCM',
] as const;

export type SrtpSuite = (typeof SRTP_SUITES)[number];

/** Master key and salt lengths in bytes (RFC 4568 section 6.2, RFC 7714 section 12). */
export const SRTP_KEY_SALT_BYTES: Readonly<Record<SrtpSuite, number>> = {
  AES_CM_128_HMAC_SHA1_80: 30,
  AES_CM_128_HMAC_SHA1_32: 30,
  AEAD_AES_128_GCM: 28,
};

/** Most packets one master key may protect: 2^48 for SRTP (RFC 3711 section 9.2). */
const MAX_LIFETIME = 2 ** 48;
/** Highest tag (RFC 4568: 1 to 9 digits). */
const MAX_TAG = 999_999_999;

export interface SdpCrypto {
  readonly tag: number;
  readonly suite: SrtpSuite;
  /** The master key followed by the master salt. */
  readonly keySalt: Uint8Array;
  /** Packets the key may protect, when the line says; callgate's own lines never do. */
  readonly lifetime?: number;
  /**
   * The master key identifier the key's packets carry (its `length` bytes, big-endian), when the
   * line names one; callgate's own lines never do (gateway/media/srtp-mki.ts).
   */
  readonly mki?: Uint8Array;
}

export type SdpCryptoParseResult =
  | { readonly ok: true; readonly value: SdpCrypto }
  | { readonly ok: false; readonly reason: string };

const refuse = (reason: string): SdpCryptoParseResult => ({ ok: false, reason });

function isSuite(name: string): name is SrtpSuite {
  return (SRTP_SUITES as readonly string[]).includes(name);
}

/** Strict base64 (RFC 4648 section 4, padded): Buffer.from would skip what is not base64. */
function decodeBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}

function parseLifetime(text: string): number | undefined {
  const power = /^2\^(\d{1,2})$/.exec(text);
  const value =
    power !== null ? 2 ** Number(power[1]) : /^\d{1,15}$/.test(text) ? Number(text) : NaN;
  return Number.isFinite(value) && value >= 1 && value <= MAX_LIFETIME ? value : undefined;
}

/** Longest MKI (RFC 4568 section 9.1: 1 to 128 bytes). */
const MAX_MKI_BYTES = 128;

/** `value:length` as the MKI's bytes, or undefined when the value does not fit its length. */
function parseMki(text: string): Uint8Array | undefined {
  const match = /^(\d{1,128}):(\d{1,3})$/.exec(text);
  if (match === null) return undefined;
  const value = BigInt(match[1] ?? '');
  const length = Number(match[2]);
  if (length < 1 || length > MAX_MKI_BYTES || value >= 1n << BigInt(8 * length)) return undefined;
  const bytes = new Uint8Array(length);
  let rest = value;
  for (let index = length - 1; index >= 0; index--) {
    bytes[index] = Number(rest & 0xffn);
    rest >>= 8n;
  }
  return bytes;
}

/** One session parameter (RFC 4568 section 6.3): only the window size hint is harmless to ignore. */
function sessionParamRefusal(param: string): string | undefined {
  if (/^WSH=\d{1,9}$/.test(param)) return undefined;
  if (param === 'KDR=0') return undefined;
  return `session parameter ${quotable(param.split('=')[0] ?? '')} is not supported`;
}

/** A name from the line, for a refusal: only what looks like a name, never base64 key material. */
function quotable(name: string): string {
  return /^[A-Z][A-Z0-9_]{0,39}$/.test(name) ? name : '(unreadable)';
}

/** Parses the value of one `a=crypto:` attribute (what follows the colon). */
export function parseCryptoAttribute(value: string): SdpCryptoParseResult {
  const fields = value.trim().split(/[ \t]+/);
  const [tagText = '', suiteName = '', keyParams = '', ...sessionParams] = fields;
  if (!/^\d{1,9}$/.test(tagText) || Number(tagText) > MAX_TAG) return refuse('bad crypto tag');
  if (!isSuite(suiteName)) return refuse(`unknown crypto suite ${quotable(suiteName)}`);
  if (keyParams.includes(';')) return refuse('more than one master key');
  if (!keyParams.startsWith('inline:')) return refuse('key method is not inline');
  const [keyText = '', ...extras] = keyParams.slice('inline:'.length).split('|');
  const keySalt = decodeBase64(keyText);
  if (keySalt === undefined) return refuse('master key is not base64');
  if (keySalt.length !== SRTP_KEY_SALT_BYTES[suiteName])
    return refuse(`master key and salt of ${keySalt.length} bytes for ${suiteName}`);
  // key-info = key-salt ["|" lifetime] ["|" mki]: an MKI has a colon, a lifetime never does.
  const [first, second, ...more] = extras;
  if (more.length > 0) return refuse('malformed key parameters');
  const lifetimeText = first !== undefined && !first.includes(':') ? first : undefined;
  const mkiText = lifetimeText === undefined ? first : second;
  if (second !== undefined && (lifetimeText === undefined || !second.includes(':')))
    return refuse('malformed key parameters');
  const lifetime = lifetimeText === undefined ? undefined : parseLifetime(lifetimeText);
  if (lifetimeText !== undefined && lifetime === undefined) return refuse('bad key lifetime');
  const mki = mkiText === undefined ? undefined : parseMki(mkiText);
  if (mkiText !== undefined && mki === undefined) return refuse('bad MKI');
  for (const param of sessionParams) {
    const refusal = sessionParamRefusal(param);
    if (refusal !== undefined) return refuse(refusal);
  }
  return {
    ok: true,
    value: {
      tag: Number(tagText),
      suite: suiteName,
      keySalt,
      ...(lifetime !== undefined && { lifetime }),
      ...(mki !== undefined && { mki }),
    },
  };
}

/** The value of callgate's `a=crypto:` attribute: tag, suite, inline key, nothing else. */
export function formatCryptoAttribute(crypto: SdpCrypto): string {
  return `${crypto.tag} ${crypto.suite} inline:${Buffer.from(crypto.keySalt).toString('base64')}`;
}
