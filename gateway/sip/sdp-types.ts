/**
 * SDP (RFC 4566) as callgate reads and writes it for offer/answer (RFC 3264). Plain data, apart
 * from the parser and the negotiation.
 */

export type SdpDirection = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

export interface SdpConnection {
  readonly netType: string;
  readonly addrType: 'IP4' | 'IP6';
  readonly address: string;
}

export interface SdpOrigin {
  readonly username: string;
  readonly sessionId: string;
  readonly sessionVersion: string;
  readonly netType: string;
  readonly addrType: string;
  readonly address: string;
}

export interface SdpRtpMap {
  readonly payloadType: number;
  readonly encoding: string;
  readonly clockRate: number;
  readonly channels?: number;
}

/** An `a=` line: `a=name:value`, or `a=name` (value `null`). */
export type SdpAttribute = readonly [name: string, value: string | null];

export interface SdpMedia {
  readonly type: string;
  readonly port: number;
  readonly portCount?: number;
  readonly protocol: string;
  readonly formats: readonly string[];
  readonly connection?: SdpConnection;
  readonly rtpmaps: readonly SdpRtpMap[];
  /** fmtp parameters by payload type. */
  readonly fmtp: Readonly<Record<number, string>>;
  readonly ptime?: number;
  readonly direction?: SdpDirection;
  readonly attributes: readonly SdpAttribute[];
}

export interface SdpSession {
  readonly origin: SdpOrigin;
  readonly sessionName: string;
  readonly connection?: SdpConnection;
  readonly direction?: SdpDirection;
  readonly attributes: readonly SdpAttribute[];
  readonly media: readonly SdpMedia[];
}

/** The codecs callgate's media layer can terminate, by the names tenants configure. */
export type AudioCodecName = 'PCMU' | 'PCMA' | 'G722' | 'opus';
