/**
 * A drachtio-srf dialog behind callgate's `SignalingDialog`: srf dialog events become typed
 * events, re-INVITEs are answered with the same negotiation as the built-in stack, REFER goes
 * through the dialog and NOTIFY progress is followed until the final sipfrag.
 */
import type Srf from 'drachtio-srf';
import type { Logger } from '../../../config/log.ts';
import type { TenantConfig } from '../../../config/schema.ts';
import { readAckAnswer, unusableAnswerReason } from '../delayed-offer.ts';
import { parseInfoBody } from '../info-body.ts';
import type { LocalMediaAddress } from '../local-media.ts';
import { answerOffer, type NegotiatedMedia } from '../sdp-negotiation.ts';
import { parseSdp, serializeSdp } from '../sdp-parser.ts';
import type { SdpSession } from '../sdp-types.ts';
import { sipMetrics } from '../sip-metrics.ts';
import type {
  DialogEndReason,
  DialogEvent,
  DialogEventListener,
  ReinviteOptions,
  SignalingDialog,
  TransferOutcome,
} from '../signaling-driver.ts';
import { TRANSFER_TIMEOUT_MS } from '../sip-dialog.ts';
import { sipfragProgress } from './drachtio-mapping.ts';

/** What callgate put in its 200: the answer to the caller's offer, or its own offer (delayed offer). */
export type DrachtioSession =
  | { readonly type: 'answer'; readonly media: NegotiatedMedia; readonly answer: SdpSession }
  | { readonly type: 'offer'; readonly offer: SdpSession };

export interface DrachtioDialogOptions {
  readonly callId: string;
  readonly tenant: TenantConfig;
  readonly logger: Logger;
  readonly onEnded: (reason: DialogEndReason) => void;
}

export class DrachtioDialog implements SignalingDialog {
  readonly id: string;
  readonly callId: string;
  private current: 'early' | 'confirmed' | 'terminated' = 'early';
  private readonly listeners = new Set<DialogEventListener>();
  private dialog: Srf.Dialog | undefined;
  private negotiated: NegotiatedMedia | undefined;
  private local: LocalMediaAddress | undefined;
  private lastAnswer: SdpSession | undefined;
  private sessionVersion = 1;
  private transferDone: ((outcome: TransferOutcome) => void) | undefined;
  private endedWith: DialogEndReason | undefined;

  constructor(private readonly options: DrachtioDialogOptions) {
    this.callId = options.callId;
    this.id = options.callId;
  }

  get state(): 'early' | 'confirmed' | 'terminated' {
    return this.current;
  }

  get media(): NegotiatedMedia | undefined {
    return this.negotiated;
  }

  /**
   * A listener that subscribes after the dialog ended (a CANCEL during the call's media setup,
   * before the session listens) is told how it ended on the next microtask, so what it opened is
   * closed at once rather than at the media timeout (test/e2e/drachtio-cancel-during-setup.test.ts).
   */
  on(listener: DialogEventListener): () => void {
    this.listeners.add(listener);
    const ended = this.endedWith;
    if (ended !== undefined) queueMicrotask(() => this.replayEnd(listener, ended));
    return () => this.listeners.delete(listener);
  }

  private replayEnd(listener: DialogEventListener, reason: DialogEndReason): void {
    if (!this.listeners.has(listener)) return;
    try {
      if (reason === 'cancelled') listener({ type: 'cancelled' });
      listener({ type: 'ended', reason });
    } catch (error) {
      this.options.logger.error('dialog listener threw', { error, callId: this.callId });
    }
  }

  emit(event: DialogEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.logger.error('dialog listener threw', { error, callId: this.callId });
      }
    }
  }

  /**
   * Called once createUAS resolved (srf resolves when the 200 is sent): the srf dialog exists and
   * its events are wired here. The `ack` event follows srf's own, which carries the answer when
   * the 200 carried callgate's offer (delayed offer).
   */
  attach(dialog: Srf.Dialog, local: LocalMediaAddress, session: DrachtioSession): void {
    this.dialog = dialog;
    this.local = local;
    if (session.type === 'answer') {
      this.negotiated = session.media;
      this.lastAnswer = session.answer;
    } else {
      this.lastAnswer = session.offer;
    }
    dialog.on('ack', (ack) => this.receiveAck(ack, session));
    dialog.on('destroy', () => {
      this.emit({ type: 'bye' });
      this.end('remote-bye');
    });
    dialog.on('info', (req, res) => {
      const info = parseInfoBody(req.get('Content-Type') ?? '', req.body ?? '');
      if (info.type === 'invalid') {
        res.send(400, info.reason, {});
        return;
      }
      res.send(200);
      this.emit(info);
    });
    dialog.on('modify', (req, res) => this.answerReinvite(req.body ?? '', req.source_address, res));
    dialog.on('notify', (req, res) => {
      res.send(200);
      const progress = sipfragProgress(req.body ?? '');
      if (progress === undefined) return;
      this.emit({ type: 'transfer', progress });
      if (progress.state === 'succeeded') this.finishTransfer({ type: 'succeeded' });
      else if (progress.state === 'failed')
        this.finishTransfer({ type: 'failed', status: progress.status, reason: progress.reason });
    });
  }

  private receiveAck(ack: Srf.SrfRequest, session: DrachtioSession): void {
    // srf reports the ACK of every 2xx, re-INVITEs' too: only the first confirms the call.
    if (this.current !== 'early') return;
    if (session.type === 'answer') {
      this.current = 'confirmed';
      this.emit({ type: 'ack' });
      return;
    }
    const answer = readAckAnswer(ack.get('Content-Type'), ack.body ?? '', session.offer);
    if (!answer.ok) {
      // No way to refuse an ACK: the session never came up, so it is ended (RFC 3261 13.3.1.4).
      this.options.logger.warn(
        'the ACK carried no usable answer to the offer, ending the call with BYE',
        { callId: this.callId, reason: answer.detail },
      );
      const dialog = this.dialog;
      sipMetrics.callsRejected.inc({ driver: 'drachtio', code: '488' });
      this.end('rejected');
      dialog?.destroy({ headers: { Reason: unusableAnswerReason(answer.detail) } });
      return;
    }
    this.negotiated = answer.media;
    this.current = 'confirmed';
    this.emit({ type: 'ack', media: answer.media });
  }

  /** `source`: where drachtio-server received the re-INVITE from (named for the media too). */
  private answerReinvite(body: string, source: string | undefined, res: Srf.SrfResponse): void {
    if (this.local === undefined) {
      res.send(488);
      return;
    }
    const offer = parseSdp(body);
    if (!offer.ok) {
      res.send(488);
      return;
    }
    const result = answerOffer(offer.value, {
      preference: this.options.tenant.codecs,
      local: this.local,
      sessionId: this.lastAnswer?.origin.sessionId ?? '1',
      sessionVersion: this.sessionVersion + 1,
      srtp: this.options.tenant.srtp,
    });
    if (!result.ok) {
      res.send(488);
      return;
    }
    this.sessionVersion += 1;
    this.negotiated = result.media;
    this.lastAnswer = result.answer;
    res.send(200, {
      body: serializeSdp(result.answer),
      headers: { 'Content-Type': 'application/sdp' },
    });
    this.emit({
      type: 'reinvite',
      media: result.media,
      offer: offer.value,
      ...(source !== undefined && source.length > 0 && { source }),
    });
  }

  cancelled(): void {
    if (this.current !== 'early') return;
    this.emit({ type: 'cancelled' });
    this.end('cancelled');
  }

  end(reason: DialogEndReason): void {
    if (this.current === 'terminated') return;
    this.current = 'terminated';
    this.endedWith = reason;
    this.finishTransfer({ type: 'failed', status: 487, reason: 'the call ended' });
    this.emit({ type: 'ended', reason });
    this.options.onEnded(reason);
  }

  private finishTransfer(outcome: TransferOutcome): void {
    const done = this.transferDone;
    this.transferDone = undefined;
    if (done === undefined) return;
    done(outcome);
    if (outcome.type === 'succeeded') {
      // Nobody awaits this BYE: a failure (destroy throwing) is logged, never left unhandled.
      this.bye('transferred').catch((error: unknown) =>
        this.options.logger.error('sending BYE after the transfer failed', {
          error,
          callId: this.callId,
        }),
      );
    }
  }

  private bye(reason: DialogEndReason): Promise<void> {
    const dialog = this.dialog;
    this.end(reason);
    if (dialog === undefined) return Promise.resolve();
    return new Promise((resolve) => dialog.destroy(undefined, () => resolve()));
  }

  hangup(): Promise<void> {
    if (this.current === 'terminated') return Promise.resolve();
    return this.bye('local-bye');
  }

  async transfer(target: string): Promise<TransferOutcome> {
    const dialog = this.dialog;
    if (dialog === undefined || this.current !== 'confirmed')
      return { type: 'failed', status: 481, reason: 'the dialog is not confirmed' };
    if (this.transferDone !== undefined)
      return { type: 'failed', status: 491, reason: 'a transfer is already in progress' };
    const done = new Promise<TransferOutcome>((resolve) => {
      this.transferDone = resolve;
    });
    const timer = setTimeout(
      () => this.finishTransfer({ type: 'failed', status: 408, reason: 'no final NOTIFY' }),
      TRANSFER_TIMEOUT_MS,
    );
    timer.unref();
    try {
      // srf types the request options as a full request; only method and headers are read.
      const response = await dialog.request({
        method: 'REFER',
        headers: { 'Refer-To': `<${target}>` },
      } as unknown as Srf.SrfRequest);
      if (response.status >= 300)
        this.finishTransfer({ type: 'failed', status: response.status, reason: response.reason });
      else this.emit({ type: 'transfer', progress: { state: 'accepted' } });
    } catch (error) {
      this.finishTransfer({ type: 'failed', status: 500, reason: String(error) });
    }
    const outcome = await done;
    clearTimeout(timer);
    return outcome;
  }

  async reinvite(options: ReinviteOptions = {}): Promise<NegotiatedMedia> {
    const dialog = this.dialog;
    if (dialog === undefined || this.lastAnswer === undefined || this.negotiated === undefined)
      throw new Error('the dialog is not confirmed');
    const local = options.local ?? this.local;
    const direction = options.hold === true ? 'sendonly' : 'sendrecv';
    const base = this.lastAnswer;
    const offer: SdpSession = {
      ...base,
      origin: { ...base.origin, sessionVersion: String(this.sessionVersion + 1) },
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
    const answerText = await dialog.modify(serializeSdp(offer));
    this.sessionVersion += 1;
    this.lastAnswer = offer;
    if (local !== undefined) this.local = local;
    const answer = parseSdp(answerText);
    const audio = answer.ok
      ? answer.value.media.find((m) => m.type === 'audio' && m.port !== 0)
      : undefined;
    const address =
      audio?.connection?.address ?? (answer.ok ? answer.value.connection?.address : undefined);
    this.negotiated = {
      ...this.negotiated,
      ...(audio !== undefined && address !== undefined
        ? { remote: { address, port: audio.port } }
        : {}),
      direction,
      held: options.hold === true,
    };
    return this.negotiated;
  }
}
