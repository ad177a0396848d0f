/**
 * SIP wire types (RFC 3261), kept apart from the parser, the serializer and the sockets. Everything
 * here is plain data: a parsed message can be logged, compared and rebuilt without any I/O.
 */

/** URI and header parameters in their received order; a parameter without `=` has the value `null`. */
export type SipParams = ReadonlyArray<readonly [name: string, value: string | null]>;

export interface SipUriParts {
  readonly scheme: 'sip' | 'sips';
  readonly user?: string;
  readonly password?: string;
  readonly host: string;
  readonly port?: number;
  readonly params: SipParams;
  /** `?name=value&...` headers of the URI, still escaped. */
  readonly headers: SipParams;
}

export interface TelUriParts {
  readonly scheme: 'tel';
  /** The subscriber number as written, visual separators included. */
  readonly number: string;
  readonly params: SipParams;
}

export type SipUri = SipUriParts | TelUriParts;

/** A name-addr or addr-spec (From, To, Contact, Route, Refer-To ...). */
export interface NameAddr {
  readonly displayName?: string;
  readonly uri: SipUri;
  /** The URI text exactly as received, so it can be echoed without re-encoding. */
  readonly uriText: string;
  readonly params: SipParams;
}

export interface ViaHeader {
  readonly protocol: string;
  /** Upper-case transport token: UDP, TCP, TLS, SCTP, WS ... */
  readonly transport: string;
  readonly host: string;
  readonly port?: number;
  readonly params: SipParams;
  readonly branch?: string;
  readonly received?: string;
  /** RFC 3581: `true` when the client asked for rport (no value yet), the port once filled in. */
  readonly rport?: number | true;
}

export interface CSeqHeader {
  readonly seq: number;
  readonly method: string;
}

/** One header line; comma-separated values of list headers arrive as separate entries. */
export interface SipHeader {
  /** Canonical long form (compact forms expanded, known names in their RFC spelling). */
  readonly name: string;
  readonly value: string;
}

/** What every parsed message carries ready to use; the raw header list holds the rest. */
interface SipMessageBase {
  readonly headers: readonly SipHeader[];
  readonly via: readonly ViaHeader[];
  readonly from: NameAddr;
  readonly to: NameAddr;
  readonly callId: string;
  readonly cseq: CSeqHeader;
  readonly body: string;
}

export interface SipRequest extends SipMessageBase {
  readonly kind: 'request';
  readonly method: string;
  readonly uri: SipUri;
  readonly uriText: string;
  /** Absent when the request had no Max-Forwards header. */
  readonly maxForwards?: number;
}

export interface SipResponse extends SipMessageBase {
  readonly kind: 'response';
  readonly status: number;
  readonly reason: string;
}

export type SipMessage = SipRequest | SipResponse;

/**
 * Why a message was refused. When the start line and the headers needed to route a response
 * (Via, From, To, Call-ID, CSeq) were readable, `answerable` holds them so a request can still be
 * answered with 400; otherwise the message can only be dropped.
 */
export interface SipParseFailure {
  readonly ok: false;
  readonly reason: string;
  readonly answerable?: {
    /** The status that answers it: 400, 416 (URI scheme) or 505 (SIP version). */
    readonly status: number;
    readonly method: string;
    readonly headers: readonly SipHeader[];
    readonly via: readonly ViaHeader[];
  };
}

export type SipParseResult<T> = { readonly ok: true; readonly value: T } | SipParseFailure;

/** Methods the built-in stack handles; anything else is answered 405 (in dialog) or 501. */
export const SUPPORTED_METHODS = [
  'INVITE',
  'ACK',
  'BYE',
  'CANCEL',
  'OPTIONS',
  'INFO',
  'REFER',
  'NOTIFY',
] as const;

/** RFC 3261 section 8.1.1.7: a branch starting with this cookie was built by an RFC 3261 element. */
export const BRANCH_MAGIC_COOKIE = 'z9hG4bK';
