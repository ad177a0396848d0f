/**
 * `SignalingDriver` on drachtio-srf, for deployments that run drachtio-server as a sidecar. The
 * server owns transports and transactions; this driver routes calls, applies the same trunk
 * security and SDP negotiation as the built-in stack (on the raw INVITE), and maps srf dialogs.
 */
import Srf from 'drachtio-srf';
import { performance } from 'node:perf_hooks';
import { rootLogger, type Logger } from '../../../config/log.ts';
import type { SipConfig, TenantConfig } from '../../../config/schema.ts';
import { CallRouter } from '../call-router.ts';
import { identifyCaller } from '../caller-identity.ts';
import { headerValue } from '../header-names.ts';
import { mediaType } from '../info-body.ts';
import { parseSipMessage } from '../message-parser.ts';
import { provisionalMedia } from '../delayed-offer.ts';
import { answerOffer, buildOffer } from '../sdp-negotiation.ts';
import { parseSdp, serializeSdp } from '../sdp-parser.ts';
import type { SdpSession } from '../sdp-types.ts';
import type {
  AcceptResult,
  DriverReadiness,
  InboundCall,
  InboundCallHandler,
  SignalingDriver,
} from '../signaling-driver.ts';
import { sipMetrics } from '../sip-metrics.ts';
import { SourceLimits, type SourceLimitDecision } from '../source-limits.ts';
import { TrunkGuard } from '../trunk-guard.ts';
import { DrachtioDialog, type DrachtioSession } from './drachtio-dialog.ts';
import { DrachtioConnection } from './drachtio-connection.ts';

export interface DrachtioSignalingDriverOptions {
  readonly sip: SipConfig;
  readonly tenants: readonly TenantConfig[];
  readonly logger?: Logger;
  readonly readSecret?: (name: string) => string | undefined;
  /** Injected in tests; a real srf instance otherwise. */
  readonly srf?: Srf;
  /** The rate limiters' clock; tests move it by hand. */
  readonly now?: () => number;
}

const DRIVER = 'drachtio';

/** srf's per-verb registration, which its published types leave out (srf.js delegates them). */
interface SrfVerbs {
  options(handler: (req: Srf.SrfRequest, res: Srf.SrfResponse) => void): void;
}

export class DrachtioSignalingDriver implements SignalingDriver {
  readonly name = 'drachtio' as const;
  private readonly logger: Logger;
  private readonly srf: Srf;
  private readonly router: CallRouter;
  private readonly guard: TrunkGuard;
  private readonly limits: SourceLimits;
  private readonly readSecret: (name: string) => string | undefined;
  private readonly dialogs = new Set<DrachtioDialog>();
  private handler: InboundCallHandler | undefined;
  private readonly connection: DrachtioConnection;

  constructor(private readonly options: DrachtioSignalingDriverOptions) {
    this.logger = (options.logger ?? rootLogger()).child({ component: 'sip', driver: DRIVER });
    this.srf = options.srf ?? new Srf();
    this.router = new CallRouter(options.tenants);
    this.readSecret = options.readSecret ?? ((name) => process.env[name]);
    this.guard = new TrunkGuard(options.tenants, { readSecret: this.readSecret });
    this.connection = new DrachtioConnection({
      sip: options.sip,
      srf: this.srf,
      logger: this.logger,
      readSecret: this.readSecret,
    });
    this.limits = new SourceLimits({
      sip: options.sip,
      ...(options.now !== undefined ? { now: options.now } : {}),
    });
  }

  onCall(handler: InboundCallHandler): void {
    this.handler = handler;
  }

  async start(): Promise<void> {
    this.srf.invite((req, res) => this.receiveInvite(req, res));
    // Registered with drachtio-server (a route request), which otherwise answers OPTIONS 503 itself.
    (this.srf as unknown as SrfVerbs).options((_req, res) =>
      res.send(200, { headers: { Allow: 'INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY' } }),
    );
    this.connection.start();
    return Promise.resolve();
  }

  readiness(): DriverReadiness {
    return this.connection.readiness();
  }

  whenReady(): Promise<void> {
    return this.connection.whenReady();
  }

  /** Entry point for every INVITE drachtio-server hands over; nothing in it may throw into srf. */
  receiveInvite(req: Srf.SrfRequest, res: Srf.SrfResponse): void {
    try {
      this.admitInvite(req, res);
    } catch (error) {
      this.logger.error('drachtio INVITE handling failed', { error });
      res.send(500);
    }
  }

  /** A source over a limit is answered 503 with Retry-After, as the built-in stack does. */
  private rejectOverLimit(decision: SourceLimitDecision, res: Srf.SrfResponse): boolean {
    if (decision.type === 'allow') return false;
    sipMetrics.rateLimited.inc({ limit: decision.limit });
    sipMetrics.callsRejected.inc({ driver: DRIVER, code: '503' });
    res.send(503, { headers: { 'Retry-After': String(decision.retryAfterSeconds) } });
    return true;
  }

  private admitInvite(req: Srf.SrfRequest, res: Srf.SrfResponse): void {
    const receivedAt = performance.now();
    if (this.rejectOverLimit(this.limits.admitInvite(req.source_address), res)) return;
    const parsed = parseSipMessage(req.raw ?? '');
    if (!parsed.ok || parsed.value.kind !== 'request') {
      sipMetrics.parseFailures.inc({ outcome: 'answered' });
      res.send(400);
      return;
    }
    const request = parsed.value;
    const number = CallRouter.calledNumber(request);
    const route = number === undefined ? undefined : this.router.route(number);
    if (number === undefined || route === undefined) {
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '404' });
      res.send(404);
      return;
    }
    if (this.rejectOverLimit(this.limits.admitAuthentication(req.source_address), res)) return;
    const decision = this.guard.check(request, req.source_address, route.tenant);
    if (decision.type === 'challenge') {
      if (headerValue(request.headers, 'Authorization') !== undefined) {
        sipMetrics.authFailures.inc({ reason: 'stale-or-unknown-nonce' });
        this.limits.recordAuthFailure(req.source_address);
      }
      res.send(401, { headers: { 'WWW-Authenticate': decision.header } });
      return;
    }
    if (decision.type === 'forbidden') {
      sipMetrics.authFailures.inc({ reason: decision.reason });
      sipMetrics.callsRejected.inc({ driver: DRIVER, code: '403' });
      this.limits.recordAuthFailure(req.source_address);
      res.send(403);
      return;
    }
    let offer: SdpSession | undefined;
    if (request.body.length > 0) {
      if (mediaType(headerValue(request.headers, 'Content-Type') ?? '') !== 'application/sdp') {
        sipMetrics.callsRejected.inc({ driver: DRIVER, code: '415' });
        res.send(415, { headers: { Accept: 'application/sdp' } });
        return;
      }
      const sdp = parseSdp(request.body);
      if (!sdp.ok) {
        res.send(488);
        return;
      }
      offer = sdp.value;
    }
    sipMetrics.callsOffered.inc({ driver: DRIVER, transport: req.protocol ?? 'udp' });
    const dialog = new DrachtioDialog({
      callId: request.callId,
      tenant: route.tenant,
      logger: this.logger,
      onEnded: () => {
        if (this.dialogs.delete(dialog)) sipMetrics.activeDialogs.dec({ driver: DRIVER });
      },
    });
    req.on('cancel', () => dialog.cancelled());
    let settled = false;
    const from = request.from;
    const callerUser = from.uri.scheme === 'tel' ? from.uri.number : from.uri.user;
    const call: InboundCall = {
      callId: request.callId,
      caller: {
        uri: from.uriText,
        ...(callerUser !== undefined ? { user: callerUser } : {}),
        ...(from.displayName !== undefined ? { displayName: from.displayName } : {}),
      },
      identity: identifyCaller(request, route.tenant, this.logger),
      calledNumber: number,
      tenant: route.tenant,
      agent: route.agent,
      headers: request.headers,
      offer,
      source: {
        address: req.source_address,
        port: Number(req.source_port),
        transport: (req.protocol ?? 'udp').toLowerCase() === 'tcp' ? 'tcp' : 'udp',
      },
      receivedAt,
      dialog,
      accept: ({ local }): AcceptResult => {
        // A CANCEL ended the dialog (drachtio-server answered it 200 and the INVITE 487): no 200.
        if (settled || dialog.state !== 'early')
          return { ok: false, status: 481, reason: 'the call is no longer pending' };
        settled = true;
        const sessionId = String(Date.now());
        let session: DrachtioSession;
        let result: AcceptResult;
        if (offer === undefined) {
          // Delayed offer: the 200 carries callgate's offer, the ACK the answer (see DrachtioDialog).
          const own = buildOffer({
            preference: route.tenant.codecs,
            local,
            sessionId,
            sessionVersion: 1,
            srtp: route.tenant.srtp,
          });
          session = { type: 'offer', offer: own };
          result = {
            ok: true,
            media: provisionalMedia(own, req.source_address),
            answerPending: true,
          };
        } else {
          const answered = answerOffer(offer, {
            preference: route.tenant.codecs,
            local,
            sessionId,
            sessionVersion: 1,
            srtp: route.tenant.srtp,
          });
          if (!answered.ok) {
            sipMetrics.callsRejected.inc({ driver: DRIVER, code: '488' });
            res.send(488);
            return { ok: false, status: 488, reason: answered.detail };
          }
          session = { type: 'answer', media: answered.media, answer: answered.answer };
          result = { ok: true, media: answered.media };
        }
        this.srf
          .createUAS(req, res, {
            localSdp: serializeSdp(session.type === 'offer' ? session.offer : session.answer),
          })
          .then((uas) => {
            this.dialogs.add(dialog);
            sipMetrics.activeDialogs.inc({ driver: DRIVER });
            sipMetrics.callsAnswered.inc({ driver: DRIVER });
            sipMetrics.setupSeconds.observe(
              { driver: DRIVER },
              (performance.now() - receivedAt) / 1000,
            );
            dialog.attach(uas, local, session);
          })
          .catch((error: unknown) => {
            // A CANCEL that crossed the 200 (drachtio-server: "Response not sent due to unknown
            // transaction"), or a lost connection: the call ends here if the CANCEL did not end it.
            const cancelled = dialog.state === 'terminated';
            this.logger[cancelled ? 'info' : 'warn']('the 200 was not sent', {
              reason: error instanceof Error ? error.message : String(error),
              callId: request.callId,
            });
            dialog.end('request-timeout');
          });
        return result;
      },
      ring: () => {
        if (!settled && dialog.state === 'early') res.send(180);
      },
      reject: (status, reason, headers = []) => {
        if (settled) return;
        settled = true;
        // Cancelled: drachtio-server already sent the final response (487).
        if (dialog.state === 'terminated') return;
        sipMetrics.callsRejected.inc({ driver: DRIVER, code: String(status) });
        const extra = { headers: Object.fromEntries(headers.map((h) => [h.name, h.value])) };
        if (reason !== undefined) res.send(status, reason, extra);
        else res.send(status, extra);
        dialog.end('rejected');
      },
    };
    if (this.handler === undefined) {
      call.reject(480);
      return;
    }
    try {
      this.handler(call);
    } catch (error) {
      this.logger.error('call handler threw', { error, callId: request.callId });
      call.reject(500);
    }
  }

  async stop(): Promise<void> {
    await Promise.all([...this.dialogs].map((dialog) => dialog.hangup()));
    this.connection.stop();
  }

  async ping(target: string): Promise<number> {
    try {
      const sent = await this.srf.request(
        target,
        { method: 'OPTIONS' } as unknown as Srf.SrfRequest,
        'OPTIONS',
        [],
      );
      return await new Promise<number>((resolve) =>
        sent.on('response', (response) => resolve(response?.status ?? 408)),
      );
    } catch {
      return 408;
    }
  }
}
