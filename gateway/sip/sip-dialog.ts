/**
 * One dialog of the built-in stack, from the INVITE that creates it (early) through the ACK
 * (confirmed) to BYE, CANCEL or a timeout (terminated). It answers in-dialog requests, builds the
 * requests callgate sends (BYE, REFER, re-INVITE, OPTIONS) with the dialog's tags, CSeq, route set
 * and remote target, and reports what happened as typed events.
 */
import type { Logger } from '../../config/log.ts';
import type { TenantConfig } from '../../config/schema.ts';
import type { ClientOutcome } from './client-transaction.ts';
import { provisionalMedia, readAckAnswer, unusableAnswerReason } from './delayed-offer.ts';
import { headerValue, headerValues } from './header-names.ts';
import { parseNameAddr, paramValue } from './header-parser.ts';
import { parseInfoBody } from './info-body.ts';
import type { InviteServerTransaction } from './invite-server-transaction.ts';
import type { LocalMediaAddress } from './local-media.ts';
import { buildResponse, warningValue, type ResponseOptions } from './message-factory.ts';
import { serializeResponse, type OutgoingRequest } from './message-serializer.ts';
import type { SipHeader, SipRequest, SipResponse } from './message-types.ts';
import type { NonInviteServerTransaction } from './non-invite-server-transaction.ts';
import { answerOffer, buildOffer, type NegotiatedMedia } from './sdp-negotiation.ts';
import { parseSdp, serializeSdp } from './sdp-parser.ts';
import type { SdpDirection, SdpSession } from './sdp-types.ts';
import type {
  AcceptResult,
  DialogEndReason,
  DialogEvent,
  DialogEventListener,
  ReinviteOptions,
  SignalingDialog,
  TransferOutcome,
} from './signaling-driver.ts';
import { newBranch } from './sip-ids.ts';
import { sipfragProgress } from './sipfrag.ts';
import type { SipEndpoint, TransportName } from './sip-transport.ts';

/** Methods callgate accepts from a peer; sent in Allow with 405 and OPTIONS answers. */
export const ALLOWED_METHODS = 'INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY';

/**
 * How long a blind transfer may take from REFER to the final NOTIFY: the transfer target may ring
 * for a while. Above 64*T1 so a REFER that times out is reported by its own transaction first.
 */
export const TRANSFER_TIMEOUT_MS = 60_000;
/** How long a stopping callgate waits for each call's BYE to be answered. */
export const SHUTDOWN_BYE_WAIT_MS = 2_000;

/** What a dialog needs from the stack that owns the sockets and transactions. */
export interface DialogHost {
  readonly logger: Logger;
  via(transport: TransportName, branch: string): string;
  /** `secure`: the dialog was started by a sips: request URI (RFC 3261 section 19.1.4). */
  contact(transport: TransportName, secure?: boolean): string;
  /**
   * Sends a request in a client transaction and resolves with its final response, a timeout, or
   * `transport-error` when nothing could be sent. Never throws.
   */
  sendRequest(
    request: OutgoingRequest,
    branch: string,
    destination: SipEndpoint,
    invite: boolean,
    acks?: InviteAcks,
  ): Promise<ClientOutcome>;
  dialogAnswered(dialog: SipDialog): void;
  /** The INVITE got a final error response from the application or the stack (counted by status). */
  dialogRejected(status: number): void;
  dialogEnded(dialog: SipDialog, reason: DialogEndReason, answered: boolean): void;
}

/** How a re-INVITE's final responses are acknowledged; its client transaction sends (and resends) them. */
export interface InviteAcks {
  /** The ACK of a non-2xx: part of the INVITE transaction, same branch (RFC 3261 section 17.1.1.3). */
  readonly non2xx?: (response: SipResponse) => Buffer;
  /** The ACK of a 2xx: the dialog's own request, a new branch (RFC 3261 section 13.2.2.4). */
  readonly for2xx?: (response: SipResponse) => Buffer;
}

export interface SipDialogOptions {
  readonly host: DialogHost;
  readonly invite: SipRequest;
  readonly transaction: InviteServerTransaction;
  readonly source: SipEndpoint;
  readonly localTag: string;
  readonly tenant: TenantConfig;
}

type ServerTransaction = InviteServerTransaction | NonInviteServerTransaction;

interface PendingTransfer {
  readonly resolve: (outcome: TransferOutcome) => void;
  readonly timer: NodeJS.Timeout;
}

export class SipDialog implements SignalingDialog {
  readonly id: string;
  readonly callId: string;
  readonly localTag: string;
  readonly remoteTag: string;
  private current: 'early' | 'confirmed' | 'terminated' = 'early';
  private answered = false;
  private ackReceived = false;
  private byeWhenAcked = false;
  private readonly listeners = new Set<DialogEventListener>();
  /** How the dialog ended, for a listener that subscribes after the end. */
  private endedWith: DialogEndReason | undefined;
  private readonly localFrom: string;
  private readonly remoteTo: string;
  private remoteTarget: string;
  private readonly routeSet: readonly string[];
  private readonly transport: TransportName;
  private readonly source: SipEndpoint;
  /** The INVITE's request URI was sips:: callgate's Contact is sips: too. */
  private readonly secure: boolean;
  /**
   * Requests callgate sends go on the connection the INVITE came on while it is open: over TLS
   * always (the peer was verified on it, and a phone behind NAT listens nowhere else), over TCP
   * when the peer's Via asks for it with `alias` (RFC 5923).
   */
  private readonly reusesConnection: boolean;
  private localCseq = 1;
  private remoteCseq: number;
  private local: LocalMediaAddress | undefined;
  private negotiated: NegotiatedMedia | undefined;
  private lastAnswer: SdpSession | undefined;
  private readonly sessionId = String(Date.now());
  private sessionVersion = 1;
  /**
   * The INVITE server transaction whose 2xx waits for an ACK, its CSeq, and callgate's offer when
   * that 2xx carried one (the INVITE had no SDP): the ACK must then carry the answer.
   */
  private awaitingAck:
    | {
        readonly cseq: number;
        readonly transaction: InviteServerTransaction;
        readonly offer?: SdpSession;
      }
    | undefined;
  private reinvitePending = false;
  private transferPending: PendingTransfer | undefined;
  private answerDeadline: NodeJS.Timeout | undefined;

  constructor(private readonly options: SipDialogOptions) {
    const invite = options.invite;
    this.callId = invite.callId;
    this.localTag = options.localTag;
    const fromTag = paramValue(invite.from.params, 'tag');
    this.remoteTag = typeof fromTag === 'string' ? fromTag : '';
    this.id = SipDialog.key(this.callId, this.localTag, this.remoteTag);
    this.localFrom = `${headerValue(invite.headers, 'To') ?? ''};tag=${this.localTag}`;
    this.remoteTo = headerValue(invite.headers, 'From') ?? '';
    const contact = headerValue(invite.headers, 'Contact');
    const contactAddr = contact === undefined ? undefined : parseNameAddr(contact);
    this.remoteTarget = contactAddr?.ok === true ? contactAddr.value.uriText : invite.from.uriText;
    this.routeSet = headerValues(invite.headers, 'Record-Route');
    this.transport = options.source.transport;
    this.source = options.source;
    this.secure = invite.uri.scheme === 'sips';
    this.reusesConnection =
      options.source.connectionId !== undefined &&
      (this.transport === 'tls' ||
        (this.transport === 'tcp' &&
          invite.via[0]?.params.some(([name]) => name.toLowerCase() === 'alias') === true));
    this.remoteCseq = invite.cseq.seq;
  }

  static key(callId: string, localTag: string, remoteTag: string): string {
    return `${callId}\n${localTag}\n${remoteTag}`;
  }

  get state(): 'early' | 'confirmed' | 'terminated' {
    return this.current;
  }

  get media(): NegotiatedMedia | undefined {
    return this.negotiated;
  }

  /**
   * A listener that subscribes after the dialog ended (a CANCEL while the call's media was being
   * set up, before its session listened) is told how it ended on the next microtask, so what the
   * session opened is closed at once rather than at the media timeout, as the drachtio dialog does
   * (test/integration/sip/builtin-cancel-late-listener.test.ts).
   */
  on(listener: DialogEventListener): () => void {
    this.listeners.add(listener);
    const ended = this.endedWith;
    if (ended !== undefined) queueMicrotask(() => this.replayEnd(listener, ended));
    return () => this.listeners.delete(listener);
  }

  private replayEnd(listener: DialogEventListener, reason: DialogEndReason): void {
    if (!this.listeners.has(listener)) return;
    const events: DialogEvent[] =
      reason === 'cancelled'
        ? [{ type: 'cancelled' }, { type: 'ended', reason }]
        : [{ type: 'ended', reason }];
    for (const event of events) {
      try {
        listener(event);
      } catch (error) {
        this.options.host.logger.error('dialog listener threw', {
          error,
          callId: this.callId,
          event: event.type,
        });
      }
    }
  }

  private emit(event: DialogEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.host.logger.error('dialog listener threw', {
          error,
          callId: this.callId,
          event: event.type,
        });
      }
    }
  }

  // ---- the initial INVITE -------------------------------------------------------------------

  private respondInvite(
    transaction: InviteServerTransaction,
    request: SipRequest,
    status: number,
    options: ResponseOptions = {},
  ): void {
    const headers: SipHeader[] = [];
    if (status > 100 && status < 300) {
      for (const route of headerValues(request.headers, 'Record-Route'))
        headers.push({ name: 'Record-Route', value: route });
      headers.push({
        name: 'Contact',
        value: this.options.host.contact(this.transport, this.secure),
      });
    }
    if (status >= 200 && status < 300)
      headers.push(
        { name: 'Allow', value: ALLOWED_METHODS },
        { name: 'Supported', value: 'replaces' },
      );
    const response = buildResponse(request, status, {
      ...options,
      toTag: this.localTag,
      headers: [...headers, ...(options.headers ?? [])],
    });
    transaction.respond(status, serializeResponse(response));
    if (status >= 200) this.clearAnswerDeadline();
  }

  /** Answers 480 if the application has neither answered nor rejected the call within `ms`. */
  answerWithin(ms: number): void {
    this.answerDeadline = setTimeout(() => {
      this.answerDeadline = undefined;
      if (this.current !== 'early' || this.options.transaction.answered) return;
      this.options.host.logger.warn(
        'the application did not answer the call in time, answering 480',
        { callId: this.callId, afterMs: ms },
      );
      this.reject(480);
    }, ms);
    this.answerDeadline.unref();
  }

  ring(): void {
    if (this.current !== 'early' || this.options.transaction.answered) return;
    this.respondInvite(this.options.transaction, this.options.invite, 180);
  }

  accept(local: LocalMediaAddress, offer: SdpSession | undefined): AcceptResult {
    if (this.current !== 'early' || this.options.transaction.answered)
      return { ok: false, status: 481, reason: 'the call is no longer pending' };
    if (offer === undefined) return this.acceptWithOffer(local);
    const result = answerOffer(offer, {
      preference: this.options.tenant.codecs,
      local,
      sessionId: this.sessionId,
      sessionVersion: this.sessionVersion,
      srtp: this.options.tenant.srtp,
    });
    if (!result.ok) {
      this.reject(
        488,
        undefined,
        result.reason === 'srtp-required'
          ? [{ name: 'Warning', value: warningValue(result.detail) }]
          : [],
      );
      return { ok: false, status: 488, reason: result.detail };
    }
    this.local = local;
    this.negotiated = result.media;
    this.lastAnswer = result.answer;
    this.answered = true;
    this.awaitingAck = {
      cseq: this.options.invite.cseq.seq,
      transaction: this.options.transaction,
    };
    this.respondInvite(this.options.transaction, this.options.invite, 200, {
      body: serializeSdp(result.answer),
    });
    this.options.host.dialogAnswered(this);
    return { ok: true, media: result.media };
  }

  /**
   * Delayed offer (RFC 3261 section 13.2.1, RFC 3264 section 4): the INVITE had no SDP, so the 200
   * carries callgate's offer and the ACK must carry the answer. The media is settled by the ACK
   * and reported with the `ack` event; until then the result holds callgate's preferred codec.
   */
  private acceptWithOffer(local: LocalMediaAddress): AcceptResult {
    const offer = buildOffer({
      preference: this.options.tenant.codecs,
      local,
      sessionId: this.sessionId,
      sessionVersion: this.sessionVersion,
      srtp: this.options.tenant.srtp,
    });
    this.local = local;
    this.lastAnswer = offer;
    this.answered = true;
    this.awaitingAck = {
      cseq: this.options.invite.cseq.seq,
      transaction: this.options.transaction,
      offer,
    };
    this.respondInvite(this.options.transaction, this.options.invite, 200, {
      body: serializeSdp(offer),
    });
    this.options.host.dialogAnswered(this);
    return { ok: true, media: provisionalMedia(offer, this.source.address), answerPending: true };
  }

  reject(status: number, reason?: string, headers: readonly SipHeader[] = []): void {
    if (this.current !== 'early' || this.options.transaction.answered) return;
    this.respondInvite(this.options.transaction, this.options.invite, status, {
      ...(reason !== undefined && { reason }),
      ...(headers.length > 0 && { headers }),
    });
    this.options.host.dialogRejected(status);
    this.end('rejected');
  }

  /** CANCEL matched the INVITE before its final response (RFC 3261 section 9.2). */
  cancel(): void {
    if (this.current !== 'early' || this.options.transaction.answered) return;
    this.respondInvite(this.options.transaction, this.options.invite, 487);
    this.emit({ type: 'cancelled' });
    this.end('cancelled');
  }

  /**
   * An INVITE transaction (the first or a re-INVITE) gave up waiting for the ACK of callgate's 2xx
   * (64*T1). RFC 3261 sections 13.3.1.4 and 14.2: the session ends with BYE either way; for a
   * re-INVITE this also frees the dialog for the next offer, which would otherwise get 491 forever.
   */
  ackTimedOut(transaction: InviteServerTransaction): void {
    if (this.current === 'terminated' || this.awaitingAck?.transaction !== transaction) return;
    const initial = transaction === this.options.transaction;
    this.awaitingAck = undefined;
    this.options.host.logger.warn(
      initial
        ? 'no ACK for 2xx, ending the call with BYE'
        : 'no ACK for the 2xx to a re-INVITE, ending the call with BYE',
      { callId: this.callId },
    );
    this.byeInBackground('ack-timeout');
  }

  /**
   * The transport refused a response of one of this dialog's INVITE transactions, which has ended
   * (RFC 3261 section 17.2.4). A call not yet answered cannot be answered any more: it ends. A 2xx
   * that cannot be (re)sent will never be ACKed: the session ends with BYE, as on an ACK timeout.
   */
  inviteTransactionFailed(transaction: InviteServerTransaction): void {
    if (this.current === 'terminated') return;
    this.options.host.logger.warn('a response to INVITE could not be sent', {
      callId: this.callId,
    });
    if (this.awaitingAck?.transaction === transaction) {
      this.awaitingAck = undefined;
      this.byeInBackground('ack-timeout');
    } else if (transaction === this.options.transaction && !this.answered) {
      this.end('rejected');
    }
  }

  receiveAck(request: SipRequest): void {
    const pending = this.awaitingAck;
    if (pending === undefined || request.cseq.seq !== pending.cseq) return;
    this.awaitingAck = undefined;
    pending.transaction.acknowledge();
    const initial = !this.ackReceived;
    let settled: NegotiatedMedia | undefined;
    if (pending.offer !== undefined) {
      const answer = readAckAnswer(
        headerValue(request.headers, 'Content-Type'),
        request.body,
        pending.offer,
      );
      if (!answer.ok) {
        // No way to refuse an ACK: the session never came up, so it is ended (RFC 3261 13.3.1.4).
        this.ackReceived = true;
        this.current = 'confirmed';
        this.options.host.logger.warn(
          'the ACK carried no usable answer to the offer, ending the call with BYE',
          { callId: this.callId, reason: answer.detail },
        );
        this.byeInBackground(initial ? 'rejected' : 'local-bye', [
          { name: 'Reason', value: unusableAnswerReason(answer.detail) },
        ]);
        return;
      }
      settled = answer.media;
      this.negotiated = answer.media;
    }
    if (initial) {
      this.ackReceived = true;
      this.current = 'confirmed';
      this.emit(settled !== undefined ? { type: 'ack', media: settled } : { type: 'ack' });
      if (this.byeWhenAcked) this.byeInBackground('local-bye');
      return;
    }
    if (settled !== undefined) {
      const sdp = parseSdp(request.body);
      if (sdp.ok)
        this.emit({ type: 'reinvite', media: settled, offer: sdp.value, ...sourceOf(request) });
    }
  }

  // ---- requests inside the dialog -----------------------------------------------------------

  /** Handles a new (not retransmitted) in-dialog request; ACK and CANCEL never come here. */
  handleRequest(request: SipRequest, transaction: ServerTransaction): void {
    const respond = (status: number, options: ResponseOptions = {}): void => {
      const response = buildResponse(request, status, options);
      transaction.respond(status, serializeResponse(response));
    };
    if (this.current === 'terminated') {
      respond(481);
      return;
    }
    if (request.cseq.seq <= this.remoteCseq) {
      // RFC 3261 section 12.2.2: an out-of-order request is answered 500.
      respond(500, { reason: 'CSeq Out Of Order' });
      return;
    }
    this.remoteCseq = request.cseq.seq;
    switch (request.method) {
      case 'BYE':
        respond(200);
        this.emit({ type: 'bye' });
        this.end('remote-bye');
        return;
      case 'INVITE':
        this.updateTarget(request);
        this.handleReinvite(request, transaction as InviteServerTransaction);
        return;
      case 'INFO':
        this.handleInfo(request, respond);
        return;
      case 'OPTIONS':
        respond(200, {
          headers: [
            { name: 'Allow', value: ALLOWED_METHODS },
            { name: 'Accept', value: 'application/sdp' },
          ],
        });
        return;
      case 'NOTIFY':
        this.handleNotify(request, respond);
        return;
      default:
        respond(405, { headers: [{ name: 'Allow', value: ALLOWED_METHODS }] });
    }
  }

  private handleReinvite(request: SipRequest, transaction: InviteServerTransaction): void {
    if (this.reinvitePending || this.awaitingAck !== undefined) {
      this.respondInvite(transaction, request, 491);
      return;
    }
    if (this.local === undefined || this.lastAnswer === undefined) {
      this.respondInvite(transaction, request, 488);
      return;
    }
    let answer: SdpSession = this.lastAnswer;
    let offer: SdpSession | undefined;
    if (request.body.length > 0) {
      const parsed = parseSdp(request.body);
      if (!parsed.ok) {
        this.respondInvite(transaction, request, 488, {
          headers: [{ name: 'Warning', value: warningValue(parsed.reason) }],
        });
        return;
      }
      const result = answerOffer(parsed.value, {
        preference: this.options.tenant.codecs,
        local: this.local,
        sessionId: this.sessionId,
        sessionVersion: this.sessionVersion + 1,
        srtp: this.options.tenant.srtp,
      });
      if (!result.ok) {
        // The old session stays as it was (RFC 3261 section 14.2).
        this.respondInvite(transaction, request, 488, {
          ...(result.reason === 'srtp-required' && {
            headers: [{ name: 'Warning', value: warningValue(result.detail) }],
          }),
        });
        return;
      }
      offer = parsed.value;
      answer = result.answer;
      this.negotiated = result.media;
    } else {
      // A re-INVITE without SDP asks for an offer: the 200 carries it and the ACK the answer.
      answer = {
        ...answer,
        origin: { ...answer.origin, sessionVersion: String(this.sessionVersion + 1) },
      };
    }
    this.sessionVersion += 1;
    this.lastAnswer = answer;
    this.awaitingAck = {
      cseq: request.cseq.seq,
      transaction,
      ...(offer === undefined ? { offer: answer } : {}),
    };
    this.respondInvite(transaction, request, 200, { body: serializeSdp(answer) });
    if (offer !== undefined && this.negotiated !== undefined)
      this.emit({ type: 'reinvite', media: this.negotiated, offer, ...sourceOf(request) });
  }

  private handleInfo(
    request: SipRequest,
    respond: (status: number, options?: ResponseOptions) => void,
  ): void {
    const info = parseInfoBody(headerValue(request.headers, 'Content-Type') ?? '', request.body);
    if (info.type === 'invalid') {
      respond(400, { reason: info.reason });
      return;
    }
    respond(200);
    this.emit(info);
  }

  private handleNotify(
    request: SipRequest,
    respond: (status: number, options?: ResponseOptions) => void,
  ): void {
    const pending = this.transferPending;
    const event = (headerValue(request.headers, 'Event') ?? '').split(';')[0]?.trim().toLowerCase();
    if (pending === undefined || event !== 'refer') {
      respond(481);
      return;
    }
    const progress = sipfragProgress(request.body);
    respond(200);
    if (progress === undefined) return;
    switch (progress.state) {
      case 'succeeded':
        this.finishTransfer({ type: 'succeeded' });
        return;
      case 'failed':
        this.finishTransfer({ type: 'failed', status: progress.status, reason: progress.reason });
        return;
      default:
        this.emit({ type: 'transfer', progress });
    }
  }

  private finishTransfer(outcome: TransferOutcome): void {
    const pending = this.transferPending;
    if (pending === undefined) return;
    this.transferPending = undefined;
    clearTimeout(pending.timer);
    if (outcome.type === 'succeeded') {
      this.emit({ type: 'transfer', progress: { state: 'succeeded', status: 200 } });
      this.byeInBackground('transferred');
    } else {
      this.emit({
        type: 'transfer',
        progress: { state: 'failed', status: outcome.status, reason: outcome.reason },
      });
    }
    pending.resolve(outcome);
  }

  // ---- requests callgate sends --------------------------------------------------------------

  private destination(): SipEndpoint {
    // Requests follow the route set, else the remote target; over TCP the caller's connection is reused.
    const first = this.routeSet[0];
    const target =
      first !== undefined ? parseNameAddr(first) : parseNameAddr(`<${this.remoteTarget}>`);
    if (target.ok && target.value.uri.scheme !== 'tel') {
      const uri = target.value.uri;
      const port = uri.port ?? (this.transport === 'tls' ? 5061 : 5060);
      const host = uri.host.replace(/^\[|\]$/g, '');
      const sameAsSource = host === this.source.address && port === this.source.port;
      if (sameAsSource) return this.source;
      return {
        transport: this.transport,
        address: host,
        port,
        ...(this.reusesConnection ? { connectionId: this.source.connectionId } : {}),
        // A new TLS connection, once this one is gone, verifies the peer as the tenant's trunk.
        ...(this.transport === 'tls' ? { tenantId: this.options.tenant.id } : {}),
      };
    }
    return this.source;
  }

  private buildRequest(
    method: string,
    cseq: number,
    branch: string,
    extra: readonly SipHeader[],
    body?: string,
    contentType?: string,
  ): OutgoingRequest {
    const headers: SipHeader[] = [
      { name: 'Via', value: this.options.host.via(this.transport, branch) },
      { name: 'Max-Forwards', value: '70' },
      { name: 'From', value: this.localFrom },
      { name: 'To', value: this.remoteTo },
      { name: 'Call-ID', value: this.callId },
      { name: 'CSeq', value: `${cseq} ${method}` },
    ];
    for (const route of this.routeSet) headers.push({ name: 'Route', value: route });
    if (method === 'INVITE' || method === 'REFER')
      headers.push({
        name: 'Contact',
        value: this.options.host.contact(this.transport, this.secure),
      });
    headers.push(...extra);
    if (body !== undefined && body.length > 0)
      headers.push({ name: 'Content-Type', value: contentType ?? 'application/sdp' });
    return { method, uriText: this.remoteTarget, headers, ...(body !== undefined ? { body } : {}) };
  }

  private async request(
    method: string,
    extra: readonly SipHeader[] = [],
    body?: string,
  ): Promise<ClientOutcome> {
    const cseq = ++this.localCseq;
    const branch = newBranch();
    const request = this.buildRequest(method, cseq, branch, extra, body);
    return this.options.host.sendRequest(request, branch, this.destination(), method === 'INVITE');
  }

  private async sendBye(reason: DialogEndReason, extra: readonly SipHeader[] = []): Promise<void> {
    if (this.current === 'terminated') return;
    this.end(reason);
    const outcome = await this.request('BYE', extra);
    if (outcome.type === 'timeout')
      this.options.host.logger.info('BYE was not answered', { callId: this.callId });
    else if (outcome.type === 'transport-error')
      this.options.host.logger.warn('BYE could not be sent', {
        callId: this.callId,
        target: this.remoteTarget,
      });
  }

  /** BYE that nobody awaits (the dialog ends at once); a failure is logged, never left unhandled. */
  private byeInBackground(reason: DialogEndReason, extra: readonly SipHeader[] = []): void {
    this.sendBye(reason, extra).catch((error: unknown) =>
      this.options.host.logger.error('sending BYE failed', { error, callId: this.callId }),
    );
  }

  async hangup(): Promise<void> {
    if (this.current === 'terminated') return;
    if (!this.answered) {
      this.reject(480);
      return;
    }
    if (!this.ackReceived && this.awaitingAck !== undefined) {
      // RFC 3261 section 15: BYE waits for the ACK of the 2xx (or its timeout).
      this.byeWhenAcked = true;
      return;
    }
    await this.sendBye('local-bye');
  }

  async transfer(target: string): Promise<TransferOutcome> {
    if (this.current !== 'confirmed')
      return { type: 'failed', status: 481, reason: 'the dialog is not confirmed' };
    if (this.transferPending !== undefined)
      return { type: 'failed', status: 491, reason: 'a transfer is already in progress' };
    const done = new Promise<TransferOutcome>((resolve) => {
      const timer = setTimeout(
        () => this.finishTransfer({ type: 'failed', status: 408, reason: 'no final NOTIFY' }),
        TRANSFER_TIMEOUT_MS,
      );
      timer.unref();
      this.transferPending = { resolve, timer };
    });
    const outcome = await this.request('REFER', [
      { name: 'Refer-To', value: `<${target}>` },
      { name: 'Referred-By', value: this.localFrom.replace(/;tag=[^;]*$/, '') },
    ]);
    if (outcome.type === 'timeout')
      this.finishTransfer({ type: 'failed', status: 408, reason: 'REFER was not answered' });
    else if (outcome.type === 'transport-error')
      this.finishTransfer({ type: 'failed', status: 503, reason: 'REFER could not be sent' });
    else if (outcome.response.status >= 300)
      this.finishTransfer({
        type: 'failed',
        status: outcome.response.status,
        reason: outcome.response.reason,
      });
    else if (this.transferPending !== undefined)
      this.emit({ type: 'transfer', progress: { state: 'accepted' } });
    return done;
  }

  async reinvite(options: ReinviteOptions = {}): Promise<NegotiatedMedia> {
    if (
      this.current !== 'confirmed' ||
      this.lastAnswer === undefined ||
      this.negotiated === undefined
    )
      throw new Error('the dialog is not confirmed');
    if (this.reinvitePending || this.awaitingAck !== undefined)
      throw new Error('a re-INVITE is already in progress');
    this.reinvitePending = true;
    try {
      const local = options.local ?? this.local;
      const direction: SdpDirection = options.hold === true ? 'sendonly' : 'sendrecv';
      const base = this.lastAnswer;
      const offer: SdpSession = {
        ...base,
        origin: {
          ...base.origin,
          sessionVersion: String(this.sessionVersion + 1),
          ...(local !== undefined ? { address: local.address } : {}),
        },
        ...(local !== undefined
          ? {
              connection: {
                netType: 'IN',
                addrType: local.address.includes(':') ? 'IP6' : 'IP4',
                address: local.address,
              },
            }
          : {}),
        media: base.media.map((m) =>
          m.port === 0
            ? m
            : { ...m, direction, ...(local !== undefined ? { port: local.port } : {}) },
        ),
      };
      const cseq = ++this.localCseq;
      const branch = newBranch();
      const request = this.buildRequest('INVITE', cseq, branch, [], serializeSdp(offer));
      const outcome = await this.options.host.sendRequest(
        request,
        branch,
        this.destination(),
        true,
        {
          non2xx: (response) => this.buildAckBytes(cseq, branch, response),
          // Built once and kept by the transaction, which sends it again for each retransmitted 2xx.
          for2xx: (response) => this.buildAckBytes(cseq, newBranch(), response),
        },
      );
      if (outcome.type === 'timeout') throw new Error('re-INVITE was not answered');
      if (outcome.type === 'transport-error') throw new Error('re-INVITE could not be sent');
      const response = outcome.response;
      if (response.status >= 300) throw new Error(`re-INVITE refused with ${response.status}`);
      this.sessionVersion += 1;
      this.lastAnswer = offer;
      if (local !== undefined) this.local = local;
      const answer = parseSdp(response.body);
      const audio = answer.ok
        ? answer.value.media.find((m) => m.type === 'audio' && m.port !== 0)
        : undefined;
      const address =
        audio?.connection?.address ?? (answer.ok ? answer.value.connection?.address : undefined);
      const current = this.negotiated;
      this.negotiated = {
        ...current,
        ...(audio !== undefined && address !== undefined
          ? { remote: { address, port: audio.port } }
          : {}),
        direction,
        held: options.hold === true,
      };
      return this.negotiated;
    } finally {
      this.reinvitePending = false;
    }
  }

  private buildAckBytes(cseq: number, branch: string, response: SipResponse): Buffer {
    const toWithTag = headerValue(response.headers, 'To') ?? this.remoteTo;
    const headers: SipHeader[] = [
      { name: 'Via', value: this.options.host.via(this.transport, branch) },
      { name: 'Max-Forwards', value: '70' },
      { name: 'From', value: this.localFrom },
      { name: 'To', value: toWithTag },
      { name: 'Call-ID', value: this.callId },
      { name: 'CSeq', value: `${cseq} ACK` },
    ];
    for (const route of this.routeSet) headers.push({ name: 'Route', value: route });
    return Buffer.from(
      `ACK ${this.remoteTarget} SIP/2.0\r\n${headers.map((h) => `${h.name}: ${h.value}\r\n`).join('')}Content-Length: 0\r\n\r\n`,
    );
  }

  /** Ends the dialog because the stack is stopping: BYE for answered calls, 503 for pending ones. */
  /**
   * Ends the call because callgate is stopping: 503 before the answer, BYE after. The BYE is
   * waited for only briefly (a peer that never answers would hold shutdown for Timer F, 32 s);
   * its transaction keeps retransmitting until the transports close.
   */
  async shutdown(): Promise<void> {
    if (this.current === 'terminated') return;
    if (!this.answered) {
      this.reject(503);
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const bounded = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SHUTDOWN_BYE_WAIT_MS);
    });
    await Promise.race([this.sendBye('shutdown'), bounded]);
    clearTimeout(timer);
  }

  private clearAnswerDeadline(): void {
    if (this.answerDeadline === undefined) return;
    clearTimeout(this.answerDeadline);
    this.answerDeadline = undefined;
  }

  private end(reason: DialogEndReason): void {
    if (this.current === 'terminated') return;
    this.current = 'terminated';
    this.endedWith = reason;
    this.clearAnswerDeadline();
    // A 2xx still waiting for its ACK (the peer sent BYE first, or callgate is stopping): nobody
    // will use the dialog it was for, so it stops being retransmitted; a late ACK finds nothing.
    const pending = this.awaitingAck;
    this.awaitingAck = undefined;
    pending?.transaction.acknowledge();
    if (this.transferPending !== undefined) {
      clearTimeout(this.transferPending.timer);
      this.transferPending.resolve({ type: 'failed', status: 487, reason: 'the call ended' });
      this.transferPending = undefined;
    }
    this.emit({ type: 'ended', reason });
    this.options.host.dialogEnded(this, reason, this.answered);
  }

  /** The dialog's remote target, for tests and logs. */
  get target(): string {
    return this.remoteTarget;
  }

  /** Updates the remote target from a re-INVITE's Contact (RFC 3261 section 12.2.2). */
  updateTarget(request: SipRequest): void {
    const contact = headerValue(request.headers, 'Contact');
    const parsed = contact === undefined ? undefined : parseNameAddr(contact);
    if (parsed?.ok === true) this.remoteTarget = parsed.value.uriText;
  }
}

/**
 * Where a request came from: the top Via's `received`, which the driver stamps whenever the Via's
 * host is not the datagram's or connection's source (stampReceived), else that host.
 */
function sourceOf(request: SipRequest): { readonly source?: string } {
  const top = request.via[0];
  if (top === undefined) return {};
  return { source: top.received ?? top.host.replace(/^\[|\]$/g, '') };
}
