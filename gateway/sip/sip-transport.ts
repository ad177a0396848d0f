/**
 * What the transaction and dialog layers need from a transport: send bytes to an endpoint and be
 * told about each complete message received. UDP and TCP implement it.
 */

export type TransportName = 'udp' | 'tcp';

/** Where a message came from, or where one goes. */
export interface SipEndpoint {
  readonly transport: TransportName;
  readonly address: string;
  readonly port: number;
  /** The TCP connection a request arrived on; responses and in-dialog requests reuse it. */
  readonly connectionId?: number;
}

/** Called with one complete message (a datagram, or one message framed out of a stream). */
export type SipMessageHandler = (data: Buffer, source: SipEndpoint) => void;

/** Why a transport threw bytes away: counted by the stack, never fatal. */
export type TransportDropReason = 'header-too-large' | 'body-too-large' | 'no-content-length' | 'idle-timeout';

export interface SipTransport {
  readonly name: TransportName;
  /** Binds the socket; resolves with the port actually bound (useful with port 0). */
  start(): Promise<{ address: string; port: number }>;
  send(data: Buffer, to: SipEndpoint): void;
  stop(): Promise<void>;
}
