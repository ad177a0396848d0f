/**
 * What the transaction and dialog layers need from a transport: send bytes to an endpoint and be
 * told about each complete message received. UDP, TCP and TLS implement it.
 */
import type { X509Certificate } from 'node:crypto';

export type TransportName = 'udp' | 'tcp' | 'tls';

/** TCP and TLS: framed by Content-Length, reliable (no retransmissions), answered on the connection. */
export function isStreamTransport(transport: TransportName): boolean {
  return transport !== 'udp';
}

/** Where a message came from, or where one goes. */
export interface SipEndpoint {
  readonly transport: TransportName;
  readonly address: string;
  readonly port: number;
  /** The TCP or TLS connection a request arrived on; responses and in-dialog requests reuse it. */
  readonly connectionId?: number;
  /**
   * TLS: the certificate chain the peer presented (leaf first), empty when it sent none. Trunk
   * security checks it against a tenant's CA for mutual TLS (gateway/sip/trunk-guard.ts).
   */
  readonly peerCertificates?: readonly X509Certificate[];
  /** TLS: the tenant whose trunk a new connection goes to; its CA and name verify the peer. */
  readonly tenantId?: string;
}

/** Called with one complete message (a datagram, or one message framed out of a stream). */
export type SipMessageHandler = (data: Buffer, source: SipEndpoint) => void;

/** Why a transport threw bytes away: counted by the stack, never fatal. */
export type TransportDropReason =
  'header-too-large' | 'body-too-large' | 'no-content-length' | 'idle-timeout';

/**
 * Whether a transport took a message. `refused` is decided before anything leaves: a destination
 * no socket can send to (port 0, above 65535, no address), a socket not running, an error the
 * socket threw. Errors reported later by the socket (ICMP unreachable, a refused connection) are
 * only logged by the transport.
 */
export type SendResult = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export const SENT: SendResult = { ok: true };

/** A port a datagram or connection can be addressed to (1-65535); port 0 means "any" to a socket. */
export function isUsablePort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65_535;
}

/** Checks a destination before it reaches a socket, which would throw on it. */
export function destinationProblem(to: SipEndpoint): string | undefined {
  if (!isUsablePort(to.port)) return `unusable port ${String(to.port)}`;
  if (to.address.length === 0) return 'no address';
  return undefined;
}

export interface SipTransport {
  readonly name: TransportName;
  /** Binds the socket; resolves with the port actually bound (useful with port 0). */
  start(): Promise<{ address: string; port: number }>;
  /** Never throws: a message that cannot be sent is `refused` with the reason. */
  send(data: Buffer, to: SipEndpoint): SendResult;
  stop(): Promise<void>;
}
