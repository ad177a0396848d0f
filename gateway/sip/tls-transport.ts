/**
 * SIP over TLS (RFC 3261 section 26): the TCP transport's connection table (framing limits, idle
 * timeout, answers on the connection) behind a TLS handshake, with what a handshake lets a peer
 * hold bounded: a handshake timeout, and per source address a cap on open connections and on
 * connections still in their handshake. The listener asks for a client certificate but does not
 * demand one: which tenant a call is for is known only from its INVITE, so mutual TLS is judged
 * there (gateway/sip/trunk-guard.ts). Connections callgate opens verify the peer: the tenant's
 * CA and name or fingerprint when the destination names a tenant, else sip.tls.caFile (or the
 * system CAs) and the host name.
 */
import { X509Certificate } from 'node:crypto';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import {
  checkServerIdentity,
  connect,
  createServer,
  type PeerCertificate,
  type Server,
  type TLSSocket,
} from 'node:tls';
import type { Logger } from '../../config/log.ts';
import type {
  SendResult,
  SipEndpoint,
  SipMessageHandler,
  SipTransport,
  TransportDropReason,
} from './sip-transport.ts';
import {
  closeServer,
  listen,
  remoteKeyOf,
  StreamConnections,
  stripMapped,
} from './tcp-transport.ts';
import type { ServerCredentials } from './tls-credentials.ts';
import { handshakeFailure, type HandshakeFailure } from './tls-handshake-failure.ts';
import { matchesExpectation, type PeerTrust } from './tls-peer-match.ts';

export type TlsRefusal = 'tls-connections-per-source' | 'tls-handshakes-per-source';

export interface TlsTransportOptions {
  readonly address: string;
  readonly port: number;
  readonly maxHeaderBytes: number;
  readonly maxBodyBytes: number;
  readonly idleTimeoutMs: number;
  readonly handshakeTimeoutMs: number;
  readonly maxConnectionsPerSource: number;
  readonly maxHandshakesPerSource: number;
  readonly credentials: ServerCredentials;
  /** CA bundle (PEM) for peers callgate connects to without a tenant; system CAs when absent. */
  readonly caPem?: string;
  /** The trust of the tenant a destination names (SipEndpoint.tenantId). */
  readonly trustFor: (tenantId: string) => PeerTrust | undefined;
  readonly onMessage: SipMessageHandler;
  readonly onDrop: (reason: TransportDropReason) => void;
  readonly onHandshakeFailed: (direction: 'inbound' | 'outbound', reason: HandshakeFailure) => void;
  readonly onRefused: (limit: TlsRefusal) => void;
  /** Told each time a connection's handshake completes or an established connection closes. */
  readonly onOpenChanged: (open: number) => void;
  readonly logger: Logger;
}

/** Per source address: connections open, and how many of them are still in their handshake. */
interface SourceCount {
  open: number;
  handshaking: number;
}

export class TlsTransport implements SipTransport {
  readonly name = 'tls' as const;
  private server: Server | undefined;
  /** The TCP listener in front of `server`: it admits a source before TLS sees its connection. */
  private listener: TcpServer | undefined;
  private readonly connections: StreamConnections;
  private readonly sources = new Map<string, SourceCount>();
  /** Raw sockets still in their handshake, by `address|port`. */
  private readonly handshaking = new Map<string, Socket>();
  private credentials: ServerCredentials;
  private established = 0;
  /** The chain each connection's peer presented, read once per connection. */
  private readonly chains = new WeakMap<TLSSocket, X509Certificate[]>();

  constructor(private readonly options: TlsTransportOptions) {
    this.credentials = options.credentials;
    this.connections = new StreamConnections({
      ...options,
      transport: 'tls',
      describe: (socket) => ({ peerCertificates: this.chainOf(socket as TLSSocket) }),
    });
  }

  start(): Promise<{ address: string; port: number }> {
    const server = createServer({
      ...this.secureOptions(),
      requestCert: true,
      rejectUnauthorized: false,
      handshakeTimeout: this.options.handshakeTimeoutMs,
    });
    server.on('secureConnection', (socket: TLSSocket) => this.handshakeDone(socket));
    server.on('tlsClientError', (error, socket) => {
      const source = stripMapped(socket.remoteAddress ?? '');
      // node:tls reports a handshake timeout here but leaves the socket open: close it, or the
      // stalled connection keeps its slot (test/integration/sip/tls-hostile-input.test.ts).
      socket.destroy();
      this.options.onHandshakeFailed('inbound', handshakeFailure(error));
      this.options.logger.debug('tls handshake failed', { error, source });
    });
    // A refused connection never reaches node:tls, so it is no handshake failure as well
    // (test/integration/sip/tls-hostile-input.test.ts).
    const listener = createTcpServer((raw) => {
      if (this.admit(raw)) server.emit('connection', raw);
    });
    this.server = server;
    this.listener = listener;
    return listen(listener, this.options.address, this.options.port, 'tls', this.options.logger);
  }

  /** Certificate and key for handshakes from now on; connections already open keep theirs. */
  setCredentials(credentials: ServerCredentials): void {
    this.credentials = credentials;
    this.server?.setSecureContext(this.secureOptions());
  }

  /** The fingerprint of the certificate new handshakes present. */
  certificateFingerprint(): string {
    return this.credentials.fingerprint;
  }

  /** Connections framed as SIP (handshake done, or opened by callgate). */
  connectionCount(): number {
    return this.connections.size;
  }

  /** Connections from `address` still in their handshake, for tests of the bound. */
  handshakingCount(address?: string): number {
    if (address === undefined) return this.handshaking.size;
    return this.sources.get(address)?.handshaking ?? 0;
  }

  send(data: Buffer, to: SipEndpoint): SendResult {
    if (this.server === undefined) return { ok: false, reason: 'the TLS listener is not running' };
    return this.connections.send(data, to, () => this.dial(to));
  }

  stop(): Promise<void> {
    this.connections.closeAll();
    // The listener's close waits for every connection, a stalled handshake's too.
    for (const raw of this.handshaking.values()) raw.destroy();
    return closeServer(this.listener, () => {
      this.listener = undefined;
      this.server = undefined;
    });
  }

  private secureOptions(): { cert: string; key: string; ca?: string } {
    return {
      cert: this.credentials.cert,
      key: this.credentials.key,
      ...(this.options.caPem !== undefined ? { ca: this.options.caPem } : {}),
    };
  }

  /** A new TCP connection, before its handshake: refused at once when its source holds too many. */
  private admit(raw: Socket): boolean {
    const address = stripMapped(raw.remoteAddress ?? '');
    const key = remoteKeyOf(raw);
    const count = this.sources.get(address) ?? { open: 0, handshaking: 0 };
    const limit: TlsRefusal | undefined =
      count.open >= this.options.maxConnectionsPerSource
        ? 'tls-connections-per-source'
        : count.handshaking >= this.options.maxHandshakesPerSource
          ? 'tls-handshakes-per-source'
          : undefined;
    if (limit !== undefined) {
      this.options.onRefused(limit);
      raw.destroy();
      return false;
    }
    count.open += 1;
    count.handshaking += 1;
    this.sources.set(address, count);
    this.handshaking.set(key, raw);
    raw.once('close', () => {
      count.open -= 1;
      if (this.handshaking.delete(key)) count.handshaking -= 1;
      if (count.open === 0) this.sources.delete(address);
    });
    return true;
  }

  private handshakeDone(socket: TLSSocket): void {
    const key = remoteKeyOf(socket);
    if (this.handshaking.delete(key)) {
      const count = this.sources.get(stripMapped(socket.remoteAddress ?? ''));
      if (count !== undefined) count.handshaking -= 1;
    }
    this.connections.adopt(socket, key);
    this.countOpen(socket);
  }

  private dial(to: SipEndpoint): Socket {
    const trust = to.tenantId !== undefined ? this.options.trustFor(to.tenantId) : undefined;
    const ca = trust?.caPem ?? this.options.caPem;
    const socket = connect({
      host: to.address,
      port: to.port,
      // callgate's own certificate, for trunks that authenticate it by mutual TLS.
      cert: this.credentials.cert,
      key: this.credentials.key,
      ...(ca !== undefined ? { ca } : {}),
      rejectUnauthorized: true,
      ...(trust?.name !== undefined && !/^[\d.:[\]]+$/.test(trust.name)
        ? { servername: trust.name }
        : {}),
      checkServerIdentity: (host, cert) => serverIdentityProblem(host, cert, trust),
    });
    const handshakeTimer = setTimeout(() => {
      socket.destroy(
        Object.assign(new Error('tls handshake timed out'), { code: 'ERR_TLS_HANDSHAKE_TIMEOUT' }),
      );
    }, this.options.handshakeTimeoutMs);
    socket.once('close', () => clearTimeout(handshakeTimer));
    socket.once('secureConnect', () => {
      clearTimeout(handshakeTimer);
      this.countOpen(socket);
    });
    socket.on('error', (error) => {
      if (socket.authorized) return;
      this.options.onHandshakeFailed('outbound', handshakeFailure(error));
      this.options.logger.warn('tls connection to peer failed', {
        error,
        to: `${to.address}:${to.port}`,
        ...(to.tenantId !== undefined ? { tenant: to.tenantId } : {}),
      });
    });
    return socket;
  }

  private chainOf(socket: TLSSocket): X509Certificate[] {
    let chain = this.chains.get(socket);
    if (chain === undefined) {
      chain = peerChain(socket);
      this.chains.set(socket, chain);
    }
    return chain;
  }

  private countOpen(socket: TLSSocket): void {
    this.established += 1;
    this.options.onOpenChanged(this.established);
    socket.once('close', () => {
      this.established -= 1;
      this.options.onOpenChanged(this.established);
    });
  }
}

/**
 * node:tls's identity check for connections callgate opens: the tenant's name or fingerprint
 * when it has one (the host is then only where the trunk is), else the host name itself.
 */
function serverIdentityProblem(
  host: string,
  cert: PeerCertificate,
  trust: PeerTrust | undefined,
): Error | undefined {
  if (trust === undefined || (trust.name === undefined && trust.fingerprint === undefined))
    return checkServerIdentity(host, cert);
  const x509 = new X509Certificate(cert.raw);
  return matchesExpectation(x509, trust)
    ? undefined
    : new Error(
        `certificate ${x509.fingerprint256} is not the trunk's (expected ${trust.name ?? trust.fingerprint ?? ''})`,
      );
}

/** The chain a peer presented, leaf first; empty when it sent no certificate. */
function peerChain(socket: TLSSocket): X509Certificate[] {
  const chain: X509Certificate[] = [];
  let cert = socket.getPeerCertificate(true) as PeerCertificate & {
    issuerCertificate?: PeerCertificate;
  };
  const seen = new Set<string>();
  while (cert?.raw !== undefined && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    chain.push(new X509Certificate(cert.raw));
    cert = cert.issuerCertificate as typeof cert;
  }
  return chain;
}
