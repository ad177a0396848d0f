/**
 * The built-in SIP stack: UDP and TCP transports, the transaction layer, dialogs, routing of
 * called numbers to tenants, trunk security and rate limits, behind the `SignalingDriver`
 * interface. Every received message goes through `receive()`: parse, match a transaction, match a
 * dialog, or start a new call. Nothing a peer sends can throw out of it.
 */
import { performance } from 'node:perf_hooks';
import { rootLogger, type Logger } from '../../config/log.ts';
import type { SipConfig, TenantConfig } from '../../config/schema.ts';
import { CallRouter } from './call-router.ts';
import { BuiltinInboundCall } from './builtin-inbound-call.ts';
import { identifyCaller } from './caller-identity.ts';
import { ClientTransaction, type ClientOutcome } from './client-transaction.ts';
import { DigestNonceStore, NONCE_LIFETIME_MS } from './digest-nonce-store.ts';
import { headerValue, headerValues } from './header-names.ts';
import { paramValue, parseNameAddr } from './header-parser.ts';
import { InviteServerTransaction } from './invite-server-transaction.ts';
import {
  buildResponse,
  stampReceived,
  warningValue,
  type AnswerableRequest,
  type ResponseOptions,
} from './message-factory.ts';
import { parseSipMessage } from './message-parser.ts';
import { serializeRequest, serializeResponse, type OutgoingRequest } from './message-serializer.ts';
import {
  BRANCH_MAGIC_COOKIE,
  SUPPORTED_METHODS,
  type SipRequest,
  type SipResponse,
  type ViaHeader,
} from './message-types.ts';
import { NonInviteServerTransaction } from './non-invite-server-transaction.ts';
import { unusablePortReason } from './request-ports.ts';
import { parseSdp } from './sdp-parser.ts';
import type { SdpSession } from './sdp-types.ts';
import type { DialogEndReason, InboundCallHandler, SignalingDriver } from './signaling-driver.ts';
import { ALLOWED_METHODS, SipDialog, type DialogHost, type InviteAcks } from './sip-dialog.ts';
import { newBranch, newCallId, newTag } from './sip-ids.ts';
import { sipMetrics } from './sip-metrics.ts';
import { resolveTimers, type SipTimerOptions, type SipTimers } from './sip-timers.ts';
import {
  isStreamTransport,
  isUsablePort,
  type SipEndpoint,
  type SipTransport,
  type TransportDropReason,
  type TransportName,
} from './sip-transport.ts';
import { SourceLimits, type SourceLimitDecision } from './source-limits.ts';
import { TcpTransport } from './tcp-transport.ts';
import {
  CredentialWatch,
  readCaBundle,
  readPeerTrusts,
  readServerCredentials,
} from './tls-credentials.ts';
import type { PeerTrust } from './tls-peer-match.ts';
import { TlsTransport } from './tls-transport.ts';
import { TrunkGuard } from './trunk-guard.ts';
import { UdpTransport } from './udp-transport.ts';

export interface BuiltinSignalingDriverOptions {
  readonly sip: SipConfig;
  readonly tenants: readonly TenantConfig[];
  readonly logger?: Logger;
  /** Shorter T1/T2/T4 for tests; production leaves the RFC values. */
  readonly timers?: SipTimerOptions;
  /** Reads digest passwords by variable name; the environment by default. */
  readonly readSecret?: (name: string) => string | undefined;
  /** The per-source limits' clock; tests move it by hand. */
  readonly now?: () => number;
}

/** Extensions callgate implements; a Require naming anything else is answered 420. */
const SUPPORTED_EXTENSIONS: ReadonlySet<string> = new Set(['replaces']);
const DRIVER = 'builtin';

type ServerTransaction = InviteServerTransaction | NonInviteServerTransaction;

export class BuiltinSignalingDriver implements SignalingDriver, DialogHost {
  readonly name = 'builtin' as const;
  readonly logger: Logger;
  private readonly timers: SipTimers;
  private readonly transports = new Map<TransportName, SipTransport>();
  private readonly boundPorts = new Map<TransportName, number>();
  private readonly serverTransactions = new Map<string, ServerTransaction>();
  /** INVITE server transactions of calls not yet answered, by transaction key, for CANCEL. */
  private readonly pendingInvites = new Map<string, SipDialog>();
  private readonly clientTransactions = new Map<string, ClientTransaction>();
  private readonly dialogs = new Map<string, SipDialog>();
  private readonly router: CallRouter;
  private readonly guard: TrunkGuard;
  private readonly limits: SourceLimits;
  /** Which dialog an INVITE server transaction belongs to (for the ACK timeout). */
  private readonly inviteOwners = new WeakMap<InviteServerTransaction, SipDialog>();
  /** When each dialog's INVITE arrived, for the setup-time histogram. */
  private readonly startedAt = new WeakMap<SipDialog, number>();
  private handler: InboundCallHandler | undefined;
  private readonly advertised: string;
  /** Each tenant's trust in its trunk's certificate (tenants[].tls), read once at construction. */
  private readonly peerTrusts: ReadonlyMap<string, PeerTrust>;
  private credentialWatch: CredentialWatch | undefined;
  private activeAnswered = 0;

  constructor(private readonly options: BuiltinSignalingDriverOptions) {
    this.logger = (options.logger ?? rootLogger()).child({ component: 'sip' });
    this.timers = resolveTimers(options.timers);
    this.router = new CallRouter(options.tenants);
    this.peerTrusts = readPeerTrusts(options.tenants);
    this.guard = new TrunkGuard(options.tenants, {
      peerTrusts: this.peerTrusts,
      nonces: new DigestNonceStore({ lifetimeMs: NONCE_LIFETIME_MS }),
      ...(options.readSecret !== undefined ? { readSecret: options.readSecret } : {}),
    });
    this.limits = new SourceLimits({
      sip: options.sip,
      ...(options.now !== undefined ? { now: options.now } : {}),
    });
    this.advertised = options.sip.advertisedAddress ?? options.sip.listen;
  }

  onCall(handler: InboundCallHandler): void {
    this.handler = handler;
  }

  /** Ports actually bound (differs from the configuration when it asked for port 0). */
  port(transport: TransportName): number | undefined {
    return this.boundPorts.get(transport);
  }

  /** The UDP receive buffer the kernel granted, in bytes (it may cap the configured size). */
  udpReceiveBufferBytes(): number | undefined {
    const udp = this.transports.get('udp');
    return udp instanceof UdpTransport ? udp.receiveBufferSize() : undefined;
  }

  /** Dialogs not yet terminated, for tests and the drain on shutdown. */
  dialogCount(): number {
    return this.dialogs.size;
  }

  /** Server and client transactions still alive (their timers running), for leak checks. */
  transactionCount(): number {
    return this.serverTransactions.size + this.clientTransactions.size;
  }

  /**
   * What the stack still holds, map by map, for the tests that check it all goes once calls have
   * ended and the transaction timers have run out.
   */
  retainedState(): {
    dialogs: number;
    serverTransactions: number;
    clientTransactions: number;
    pendingInvites: number;
  } {
    return {
      dialogs: this.dialogs.size,
      serverTransactions: this.serverTransactions.size,
      clientTransactions: this.clientTransactions.size,
      pendingInvites: this.pendingInvites.size,
    };
  }

  async start(): Promise<void> {
    const sip = this.options.sip;
    const onMessage = (data: Buffer, source: SipEndpoint): void => this.receive(data, source);
    if (sip.transports.includes('udp')) {
      const udp = new UdpTransport({
        address: sip.listen,
        port: sip.udpPort,
        receiveBufferBytes: sip.udpReceiveBufferBytes,
        onMessage,
        logger: this.logger,
      });
      this.boundPorts.set('udp', (await udp.start()).port);
      this.transports.set('udp', udp);
    }
    if (sip.transports.includes('tcp')) {
      const tcp = new TcpTransport({
        address: sip.listen,
        port: sip.tcpPort,
        maxHeaderBytes: sip.maxMessageBytes,
        maxBodyBytes: sip.maxMessageBytes,
        idleTimeoutMs: sip.tcpIdleTimeoutMs,
        onMessage,
        onDrop: (reason: TransportDropReason) => {
          if (reason !== 'idle-timeout')
            sipMetrics.parseFailures.inc({ outcome: `dropped-${reason}` });
        },
        logger: this.logger,
      });
      this.boundPorts.set('tcp', (await tcp.start()).port);
      this.transports.set('tcp', tcp);
    }
    if (sip.transports.includes('tls')) await this.startTls();
    this.logger.info('sip listening', {
      address: sip.listen,
      udp: this.boundPorts.get('udp'),
      tcp: this.boundPorts.get('tcp'),
      tls: this.boundPorts.get('tls'),
    });
  }

  /** The TLS listener, and the watch that hands it a changed certificate and key. */
  private async startTls(): Promise<void> {
    const sip = this.options.sip;
    const settings = sip.tls;
    if (settings === undefined) throw new Error('sip.transports lists tls but sip.tls is not set');
    const credentials = readServerCredentials(settings);
    // Tenants' CAs beside callgate's own: a client is told which CAs its certificate may chain to.
    const caPem =
      [
        ...(settings.caFile !== undefined ? [readCaBundle(settings.caFile).pem] : []),
        ...[...this.peerTrusts.values()].map((trust) => trust.caPem),
      ].join('\n') || undefined;
    const tls = new TlsTransport({
      address: sip.listen,
      port: sip.tlsPort,
      maxHeaderBytes: sip.maxMessageBytes,
      maxBodyBytes: sip.maxMessageBytes,
      idleTimeoutMs: sip.tcpIdleTimeoutMs,
      handshakeTimeoutMs: settings.handshakeTimeoutMs,
      maxConnectionsPerSource: settings.maxConnectionsPerSource,
      maxHandshakesPerSource: settings.maxHandshakesPerSource,
      credentials,
      ...(caPem !== undefined ? { caPem } : {}),
      trustFor: (tenantId) => this.peerTrusts.get(tenantId),
      onMessage: (data, source) => this.receive(data, source),
      onDrop: (reason: TransportDropReason) => {
        if (reason !== 'idle-timeout')
          sipMetrics.parseFailures.inc({ outcome: `dropped-${reason}` });
      },
      onHandshakeFailed: (direction, reason) =>
        sipMetrics.tlsHandshakeFailures.inc({ direction, reason }),
      onRefused: (limit) => sipMetrics.rateLimited.inc({ limit }),
      onOpenChanged: (open) => sipMetrics.tlsConnections.set(open),
      logger: this.logger,
    });
    this.boundPorts.set('tls', (await tls.start()).port);
    this.transports.set('tls', tls);
    this.logger.info('tls certificate', { fingerprint: credentials.fingerprint });
    const watch = new CredentialWatch({
      files: settings,
      intervalMs: settings.reloadIntervalMs,
      onChange: (next) => {
        tls.setCredentials(next);
        sipMetrics.tlsCertificateReloads.inc({ outcome: 'loaded' });
        this.logger.info('tls certificate reloaded', { fingerprint: next.fingerprint });
      },
      onError: (error) => {
        sipMetrics.tlsCertificateReloads.inc({ outcome: 'failed' });
        this.logger.error('tls certificate not reloaded: the pair in use stays', {
          error: error.message,
          fingerprint: tls.certificateFingerprint(),
        });
      },
    });
    watch.start();
    this.credentialWatch = watch;
  }

  /** The fingerprint of the certificate new TLS handshakes present (undefined without TLS). */
  tlsCertificateFingerprint(): string | undefined {
    const tls = this.transports.get('tls');
    return tls instanceof TlsTransport ? tls.certificateFingerprint() : undefined;
  }

  /** Open TLS connections and those still in their handshake, for the tests of the bounds. */
  tlsConnectionCounts(): { open: number; handshaking: number } | undefined {
    const tls = this.transports.get('tls');
    return tls instanceof TlsTransport
      ? { open: tls.connectionCount(), handshaking: tls.handshakingCount() }
      : undefined;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.dialogs.values()].map((dialog) => dialog.shutdown()));
    for (const transaction of [...this.serverTransactions.values()]) transaction.terminate();
    for (const transaction of [...this.clientTransactions.values()]) transaction.terminate();
    this.credentialWatch?.stop();
    await Promise.all([...this.transports.values()].map((transport) => transport.stop()));
    this.transports.clear();
  }

  // ---- receiving ----------------------------------------------------------------------------

  /** Entry point for every complete message from any transport. */
  receive(data: Buffer, source: SipEndpoint): void {
    try {
      this.dispatch(data, source);
    } catch (error) {
      // A bug must cost one message, never the process.
      sipMetrics.parseFailures.inc({ outcome: 'internal-error' });
      this.logger.error('sip message handling failed', {
        error,
        source: `${source.address}:${source.port}`,
      });
    }
  }

  private dispatch(data: Buffer, source: SipEndpoint): void {
    const parsed = parseSipMessage(data, {
      maxBytes: this.options.sip.maxMessageBytes,
      stream: isStreamTransport(source.transport),
    });
    if (!parsed.ok) {
      const answerable = parsed.answerable;
      const routable =
        answerable !== undefined &&
        answerable.method !== 'ACK' &&
        ['From', 'To', 'Call-ID', 'CSeq'].every(
          (name) => headerValue(answerable.headers, name) !== undefined,
        );
      if (answerable !== undefined && routable) {
        sipMetrics.parseFailures.inc({ outcome: 'answered' });
        const destination = this.responseDestination(answerable.via[0], source);
        this.sendResponse(answerable, answerable.status, destination, {
          headers: [{ name: 'Warning', value: warningValue(parsed.reason) }],
        });
      } else {
        sipMetrics.parseFailures.inc({ outcome: 'dropped' });
        if (this.logger.isEnabled('debug'))
          this.logger.debug('dropped unparseable sip message', {
            reason: parsed.reason,
            source: source.address,
          });
      }
      return;
    }
    const message = parsed.value;
    if (message.kind === 'response') this.receiveResponse(message);
    else this.receiveRequest(stampReceived(message, source.address, source.port), source);
  }

  private receiveResponse(response: SipResponse): void {
    const branch = response.via[0]?.branch;
    const transaction =
      branch === undefined
        ? undefined
        : this.clientTransactions.get(`${branch}\n${response.cseq.method}`);
    if (transaction !== undefined) {
      transaction.receiveResponse(response);
      return;
    }
    if (response.status >= 200 && response.status < 300 && response.cseq.method === 'INVITE')
      sipMetrics.retransmissions.inc({ direction: 'received' });
  }

  private transactionKey(request: SipRequest, method = request.method): string {
    const top = request.via[0];
    const sentBy = top === undefined ? '' : `${top.host}:${top.port ?? ''}`;
    const keyMethod = method === 'ACK' ? 'INVITE' : method;
    if (top?.branch?.startsWith(BRANCH_MAGIC_COOKIE) === true)
      return `${top.branch}\n${sentBy}\n${keyMethod}`;
    // RFC 2543 peers: match on the request's identity instead of the branch (RFC 3261 section 17.2.3).
    const fromTag = paramValue(request.from.params, 'tag') ?? '';
    return `${request.callId}\n${request.cseq.seq}\n${fromTag}\n${sentBy}\n${top?.branch ?? ''}\n${keyMethod}`;
  }

  private receiveRequest(request: SipRequest, source: SipEndpoint): void {
    if (request.method === 'ACK') {
      this.receiveAck(request);
      return;
    }
    const key = this.transactionKey(request);
    const existing = this.serverTransactions.get(key);
    if (existing !== undefined) {
      sipMetrics.retransmissions.inc({ direction: 'received' });
      existing.receiveRetransmission();
      return;
    }
    const destination = this.responseDestination(request.via[0], source);
    const transaction = this.createServerTransaction(request, key, destination, source.transport);
    const respond = (status: number, options: ResponseOptions = {}): void => {
      transaction.respond(
        status,
        serializeResponse(buildResponse(request, status, { toTag: newTag(), ...options })),
      );
      if (status >= 200) sipMetrics.responses.inc({ code: String(status) });
    };
    const badPort = unusablePortReason(request);
    if (badPort !== undefined) {
      // Nothing may be built on a port no socket can send to: not a dialog, not a BYE to it later.
      respond(400, { reason: badPort });
      return;
    }
    if (request.method === 'CANCEL') {
      this.receiveCancel(request, transaction);
      return;
    }
    if (request.maxForwards === 0) {
      respond(483);
      return;
    }
    const unsupported = headerValues(request.headers, 'Require').filter(
      (ext) => !SUPPORTED_EXTENSIONS.has(ext.toLowerCase()),
    );
    if (unsupported.length > 0) {
      respond(420, { headers: [{ name: 'Unsupported', value: unsupported.join(', ') }] });
      return;
    }
    const toTag = paramValue(request.to.params, 'tag');
    if (typeof toTag === 'string') {
      const fromTag = paramValue(request.from.params, 'tag');
      const dialog = this.dialogs.get(
        SipDialog.key(request.callId, toTag, typeof fromTag === 'string' ? fromTag : ''),
      );
      if (dialog === undefined) {
        respond(481);
        return;
      }
      // A re-INVITE's 2xx waits for its ACK like the first one's: its timeout must reach the dialog.
      if (transaction instanceof InviteServerTransaction)
        this.inviteOwners.set(transaction, dialog);
      dialog.handleRequest(request, transaction);
      return;
    }
    switch (request.method) {
      case 'INVITE':
        this.receiveInvite(request, source, transaction as InviteServerTransaction, key, respond);
        return;
      case 'OPTIONS':
        respond(200, {
          headers: [
            { name: 'Allow', value: ALLOWED_METHODS },
            { name: 'Accept', value: 'application/sdp' },
            { name: 'Supported', value: 'replaces' },
          ],
        });
        return;
      default:
        if ((SUPPORTED_METHODS as readonly string[]).includes(request.method)) respond(481);
        else respond(405, { headers: [{ name: 'Allow', value: ALLOWED_METHODS }] });
    }
  }

  private receiveAck(request: SipRequest): void {
    const inviteTransaction = this.serverTransactions.get(this.transactionKey(request, 'INVITE'));
    if (
      inviteTransaction instanceof InviteServerTransaction &&
      inviteTransaction.state === 'completed'
    ) {
      inviteTransaction.receiveAck();
      return;
    }
    const toTag = paramValue(request.to.params, 'tag');
    const fromTag = paramValue(request.from.params, 'tag');
    if (typeof toTag !== 'string') return;
    this.dialogs
      .get(SipDialog.key(request.callId, toTag, typeof fromTag === 'string' ? fromTag : ''))
      ?.receiveAck(request);
  }

  private receiveCancel(request: SipRequest, transaction: ServerTransaction): void {
    const inviteKey = this.transactionKey(request, 'INVITE');
    const dialog = this.pendingInvites.get(inviteKey);
    const status = dialog === undefined ? 481 : 200;
    transaction.respond(
      status,
      serializeResponse(buildResponse(request, status, { toTag: dialog?.localTag ?? newTag() })),
    );
    // RFC 3261 section 9.2: 200 to the CANCEL, then 487 to the INVITE.
    dialog?.cancel();
  }

  private receiveInvite(
    request: SipRequest,
    source: SipEndpoint,
    transaction: InviteServerTransaction,
    key: string,
    respond: (status: number, options?: ResponseOptions) => void,
  ): void {
    const receivedAt = performance.now();
    const rejectOverLimit = (decision: SourceLimitDecision): boolean => {
      if (decision.type === 'allow') return false;
      sipMetrics.rateLimited.inc({ limit: decision.limit });
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '503' });
      respond(503, {
        headers: [{ name: 'Retry-After', value: String(decision.retryAfterSeconds) }],
      });
      return true;
    };
    if (rejectOverLimit(this.limits.admitInvite(source.address))) return;
    const number = CallRouter.calledNumber(request);
    const route = number === undefined ? undefined : this.router.route(number);
    if (number === undefined || route === undefined) {
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '404' });
      respond(404);
      return;
    }
    if (rejectOverLimit(this.limits.admitAuthentication(source.address))) return;
    const decision = this.guard.check(
      request,
      source.address,
      route.tenant,
      source.transport === 'tls' ? (source.peerCertificates ?? []) : undefined,
    );
    if (decision.type === 'challenge') {
      if (headerValue(request.headers, 'Authorization') !== undefined) {
        sipMetrics.authFailures.inc({ reason: 'stale-or-unknown-nonce' });
        this.limits.recordAuthFailure(source.address);
      }
      respond(401, { headers: [{ name: 'WWW-Authenticate', value: decision.header }] });
      return;
    }
    if (decision.type === 'forbidden') {
      sipMetrics.authFailures.inc({ reason: decision.reason });
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '403' });
      this.limits.recordAuthFailure(source.address);
      respond(403);
      return;
    }
    let offer: SdpSession | undefined;
    if (request.body.length > 0) {
      const contentType = (headerValue(request.headers, 'Content-Type') ?? '')
        .split(';')[0]
        ?.trim()
        .toLowerCase();
      if (contentType !== 'application/sdp') {
        respond(415, { headers: [{ name: 'Accept', value: 'application/sdp' }] });
        return;
      }
      const sdp = parseSdp(request.body);
      if (!sdp.ok) {
        sipMetrics.callsRejected.inc({ driver: DRIVER, code: '488' });
        respond(488, { headers: [{ name: 'Warning', value: warningValue(sdp.reason) }] });
        return;
      }
      offer = sdp.value;
    }
    respond(100);
    // The transport refused even the 100: nothing can reach this caller, so no call is started.
    if (transaction.state === 'terminated') return;
    sipMetrics.callsOffered.inc({ driver: DRIVER, transport: source.transport });
    const dialog = new SipDialog({
      host: this,
      invite: request,
      transaction,
      source,
      localTag: newTag(),
      tenant: route.tenant,
    });
    this.dialogs.set(dialog.id, dialog);
    this.pendingInvites.set(key, dialog);
    this.inviteOwners.set(transaction, dialog);
    this.startedAt.set(dialog, receivedAt);
    const call = new BuiltinInboundCall({
      request,
      dialog,
      calledNumber: number,
      identity: identifyCaller(request, route.tenant, this.logger),
      tenant: route.tenant,
      agent: route.agent,
      offer,
      source,
      receivedAt,
    });
    const handler = this.handler;
    if (handler === undefined) {
      dialog.reject(480);
      return;
    }
    dialog.answerWithin(this.timers.answerTimeout);
    try {
      handler(call);
    } catch (error) {
      this.logger.error('call handler threw', { error, callId: request.callId });
      dialog.reject(500);
    }
  }

  private createServerTransaction(
    request: SipRequest,
    key: string,
    destination: SipEndpoint,
    transport: TransportName,
  ): ServerTransaction {
    const send = (data: Buffer): boolean => this.sendTo(data, destination);
    const onRetransmit = (): void => sipMetrics.retransmissions.inc({ direction: 'sent' });
    const reliable = isStreamTransport(transport);
    const onTerminated = (): void => {
      if (this.serverTransactions.get(key) === transaction) this.serverTransactions.delete(key);
      this.pendingInvites.delete(key);
    };
    const transaction: ServerTransaction =
      request.method === 'INVITE'
        ? new InviteServerTransaction({
            timers: this.timers,
            reliable,
            send,
            onRetransmit,
            onTerminated,
            onAckTimeout: () =>
              this.inviteOwners
                .get(transaction as InviteServerTransaction)
                ?.ackTimedOut(transaction as InviteServerTransaction),
            // Told after the current step, never from inside the dialog's own respond().
            onTransportError: () =>
              setImmediate(() =>
                this.safely('invite transaction failure', () =>
                  this.inviteOwners
                    .get(transaction as InviteServerTransaction)
                    ?.inviteTransactionFailed(transaction as InviteServerTransaction),
                ),
              ),
          })
        : new NonInviteServerTransaction({
            timers: this.timers,
            reliable,
            send,
            onRetransmit,
            onTerminated,
          });
    this.serverTransactions.set(key, transaction);
    return transaction;
  }

  /**
   * RFC 3261 section 18.2.2 with RFC 3581: TCP and TLS answer on the connection; UDP answers the address
   * the request came from (what `received` says, whatever the peer wrote in it) at the Via port, or
   * at the source port when the Via asks for rport or names a port no datagram can go to.
   */
  private responseDestination(via: ViaHeader | undefined, source: SipEndpoint): SipEndpoint {
    if (isStreamTransport(source.transport) || via === undefined) return source;
    const viaPort = via.port ?? 5060;
    const port = via.rport !== undefined || !isUsablePort(viaPort) ? source.port : viaPort;
    return { transport: 'udp', address: source.address, port };
  }

  private sendResponse(
    request: AnswerableRequest,
    status: number,
    destination: SipEndpoint,
    options: ResponseOptions = {},
  ): void {
    this.sendTo(
      serializeResponse(buildResponse(request, status, { toTag: newTag(), ...options })),
      destination,
    );
    sipMetrics.responses.inc({ code: String(status) });
  }

  /** False when nothing was sent; the caller's transaction then ends. Never throws. */
  private sendTo(data: Buffer, destination: SipEndpoint): boolean {
    const transport = this.transports.get(destination.transport);
    if (transport === undefined) {
      this.logger.warn('sip message not sent: no transport for destination', {
        transport: destination.transport,
      });
      return false;
    }
    const result = transport.send(data, destination);
    if (!result.ok)
      this.logger.warn('sip message not sent: the transport refused it', {
        reason: result.reason,
        to: `${destination.transport}:${destination.address}:${destination.port}`,
      });
    return result.ok;
  }

  /** Runs a deferred step; what it throws is logged, never left to crash the process. */
  private safely(what: string, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.logger.error(`${what} failed`, { error });
    }
  }

  // ---- DialogHost ---------------------------------------------------------------------------

  via(transport: TransportName, branch: string): string {
    return `SIP/2.0/${transport.toUpperCase()} ${this.hostPort(transport)};branch=${branch};rport`;
  }

  contact(transport: TransportName, secure = false): string {
    // RFC 3261 section 19.1.4: a dialog a sips: URI started stays sips:, which implies TLS.
    if (secure && transport === 'tls') return `<sips:callgate@${this.hostPort(transport)}>`;
    const param = transport === 'udp' ? '' : `;transport=${transport}`;
    return `<sip:callgate@${this.hostPort(transport)}${param}>`;
  }

  private hostPort(transport: TransportName): string {
    const host = this.advertised.includes(':') ? `[${this.advertised}]` : this.advertised;
    return `${host}:${this.boundPorts.get(transport) ?? 5060}`;
  }

  sendRequest(
    request: OutgoingRequest,
    branch: string,
    destination: SipEndpoint,
    invite: boolean,
    acks: InviteAcks = {},
  ): Promise<ClientOutcome> {
    const key = `${branch}\n${request.method}`;
    const transaction = new ClientTransaction({
      invite,
      request: serializeRequest(request),
      timers: this.timers,
      reliable: isStreamTransport(destination.transport),
      send: (data) => this.sendTo(data, destination),
      ...(acks.non2xx !== undefined ? { buildAck: acks.non2xx } : {}),
      ...(acks.for2xx !== undefined ? { build2xxAck: acks.for2xx } : {}),
      onRetransmit: () => sipMetrics.retransmissions.inc({ direction: 'sent' }),
      onTerminated: () => this.clientTransactions.delete(key),
    });
    this.clientTransactions.set(key, transaction);
    transaction.start();
    return transaction.outcome;
  }

  dialogAnswered(dialog: SipDialog): void {
    this.activeAnswered += 1;
    sipMetrics.activeDialogs.inc({ driver: DRIVER });
    sipMetrics.callsAnswered.inc({ driver: DRIVER });
    sipMetrics.responses.inc({ code: '200' });
    const started = this.startedAt.get(dialog);
    if (started !== undefined)
      sipMetrics.setupSeconds.observe({ driver: DRIVER }, (performance.now() - started) / 1000);
  }

  dialogRejected(status: number): void {
    sipMetrics.callsRejected.inc({ driver: DRIVER, code: String(status) });
    sipMetrics.responses.inc({ code: String(status) });
  }

  dialogEnded(dialog: SipDialog, reason: DialogEndReason, answered: boolean): void {
    this.dialogs.delete(dialog.id);
    if (answered) {
      this.activeAnswered -= 1;
      sipMetrics.activeDialogs.dec({ driver: DRIVER });
      // Answered with callgate's offer, then ended because the ACK's answer was unusable.
      if (reason === 'rejected') sipMetrics.callsRejected.inc({ driver: DRIVER, code: '488' });
    } else if (reason === 'cancelled') {
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '487' });
    }
  }

  /** Answered dialogs not yet ended. */
  answeredCount(): number {
    return this.activeAnswered;
  }

  // ---- out of dialog ------------------------------------------------------------------------

  /** Ready once start() bound the sockets (and until stop() closed them). */
  readiness(): ReturnType<SignalingDriver['readiness']> {
    return this.transports.size > 0 ? { ready: true } : { ready: false, reason: 'not listening' };
  }

  whenReady(): Promise<void> {
    return Promise.resolve();
  }

  async ping(target: string): Promise<number> {
    const parsed = parseNameAddr(`<${target}>`);
    if (!parsed.ok || parsed.value.uri.scheme === 'tel') return 400;
    const uri = parsed.value.uri;
    const transportParam = paramValue(uri.params, 'transport');
    const named = typeof transportParam === 'string' ? transportParam.toLowerCase() : 'udp';
    const transport: TransportName =
      uri.scheme === 'sips' || named === 'tls' ? 'tls' : named === 'tcp' ? 'tcp' : 'udp';
    if (!this.transports.has(transport)) return 503;
    const branch = newBranch();
    const request: OutgoingRequest = {
      method: 'OPTIONS',
      uriText: target,
      headers: [
        { name: 'Via', value: this.via(transport, branch) },
        { name: 'Max-Forwards', value: '70' },
        { name: 'From', value: `<sip:callgate@${this.hostPort(transport)}>;tag=${newTag()}` },
        { name: 'To', value: `<${target}>` },
        { name: 'Call-ID', value: newCallId(this.advertised) },
        { name: 'CSeq', value: '1 OPTIONS' },
        { name: 'Accept', value: 'application/sdp' },
      ],
    };
    const outcome = await this.sendRequest(
      request,
      branch,
      {
        transport,
        address: uri.host.replace(/^\[|\]$/g, ''),
        port: uri.port ?? (transport === 'tls' ? 5061 : 5060),
      },
      false,
    );
    // RFC 3261 section 8.1.3.1: a transport error counts as 503.
    return outcome.type === 'response'
      ? outcome.response.status
      : outcome.type === 'timeout'
        ? 408
        : 503;
  }
}
