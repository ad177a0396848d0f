/**
 * The interface between SIP signaling and the rest of the gateway. Two drivers implement it: the
 * built-in stack and drachtio-srf. The application receives inbound calls, answers or rejects them,
 * and follows each dialog through typed events.
 */
import type { TenantConfig } from '../../config/schema.ts';
import type { CallerIdentity } from './caller-identity.ts';
import type { LocalMediaAddress } from './local-media.ts';
import type { SipHeader } from './message-types.ts';
import type { NegotiatedMedia } from './sdp-negotiation.ts';
import type { SdpSession } from './sdp-types.ts';
import type { TransportName } from './sip-transport.ts';

/** Why a dialog ended. */
export type DialogEndReason =
  | 'remote-bye'
  | 'local-bye'
  | 'cancelled'
  /** Refused before it began: a final error response, or BYE when the ACK's answer to callgate's offer was unusable. */
  | 'rejected'
  | 'ack-timeout'
  | 'transferred'
  | 'request-timeout'
  | 'shutdown';

export type TransferProgress =
  | { readonly state: 'accepted' }
  | { readonly state: 'trying' | 'ringing'; readonly status: number }
  | { readonly state: 'succeeded'; readonly status: number }
  | { readonly state: 'failed'; readonly status: number; readonly reason: string };

export type DialogEvent =
  /**
   * The caller acknowledged the 200: media may flow both ways. `media` is set when the INVITE had
   * no SDP (delayed offer): the 200 carried callgate's offer, the ACK the answer, and this is the
   * media it settled (until then the application only had a provisional choice, see `accept`).
   * An ACK without a usable answer never gets here: the call ends with BYE (reason `rejected`).
   */
  | { readonly type: 'ack'; readonly media?: NegotiatedMedia }
  /** The caller cancelled before the call was answered. */
  | { readonly type: 'cancelled' }
  /** The caller hung up. */
  | { readonly type: 'bye' }
  /**
   * The caller changed the session (hold, resume, new address or codec); already answered. After
   * a re-INVITE without SDP, `offer` is the caller's answer (from the ACK) to callgate's offer.
   * `source` is the address the re-INVITE (or that ACK) came from: like the INVITE's source, it
   * may send the call's media (gateway/media/media-source-policy.ts).
   */
  | {
      readonly type: 'reinvite';
      readonly media: NegotiatedMedia;
      readonly offer: SdpSession;
      readonly source?: string;
    }
  /** A DTMF digit sent by SIP INFO (application/dtmf-relay or application/dtmf). */
  | { readonly type: 'dtmf'; readonly digit: string; readonly durationMs?: number }
  /** Any other INFO, answered 200. */
  | { readonly type: 'info'; readonly contentType: string; readonly body: string }
  | { readonly type: 'transfer'; readonly progress: TransferProgress }
  | { readonly type: 'ended'; readonly reason: DialogEndReason };

export type DialogEventListener = (event: DialogEvent) => void;

export type TransferOutcome =
  | { readonly type: 'succeeded' }
  | { readonly type: 'failed'; readonly status: number; readonly reason: string };

export interface ReinviteOptions {
  /** Put the caller on hold (a=sendonly) or take it off (a=sendrecv). */
  readonly hold?: boolean;
  /** Move callgate's media to a new address or port. */
  readonly local?: LocalMediaAddress;
}

export interface SignalingDialog {
  readonly id: string;
  readonly callId: string;
  /** The negotiated media, updated by every re-INVITE. Undefined until the call is answered. */
  readonly media: NegotiatedMedia | undefined;
  readonly state: 'early' | 'confirmed' | 'terminated';
  /** Subscribes to this dialog's events; returns the unsubscribe function. */
  on(listener: DialogEventListener): () => void;
  /** Sends BYE (or, before the answer, a final error response). Resolves when done. */
  hangup(): Promise<void>;
  /** Blind transfer: REFER to `target`, follow NOTIFY progress, BYE when the transfer succeeds. */
  transfer(target: string): Promise<TransferOutcome>;
  /** Sends a re-INVITE with callgate's current offer; resolves with the media the peer answered. */
  reinvite(options?: ReinviteOptions): Promise<NegotiatedMedia>;
}

export type AcceptResult =
  /**
   * `answerPending` is set for an INVITE without SDP: the 200 carried callgate's offer, `media` is
   * callgate's first codec with the caller's address and port 9 (nothing known yet), and the media
   * the caller settled comes with the `ack` event.
   */
  | { readonly ok: true; readonly media: NegotiatedMedia; readonly answerPending?: true }
  | { readonly ok: false; readonly status: number; readonly reason: string };

export interface InboundCall {
  readonly callId: string;
  /** The From header's address. */
  readonly caller: { readonly uri: string; readonly user?: string; readonly displayName?: string };
  /** Who the call is attributed to: a trusted trunk's asserted identity, else From (caller-identity.ts). */
  readonly identity: CallerIdentity;
  readonly calledNumber: string;
  readonly tenant: TenantConfig;
  readonly agent: string;
  /** Every header of the INVITE, in order, names in canonical form. */
  readonly headers: readonly SipHeader[];
  /** The parsed SDP offer; undefined for an INVITE without one (delayed offer). */
  readonly offer: SdpSession | undefined;
  readonly source: {
    readonly address: string;
    readonly port: number;
    readonly transport: TransportName;
  };
  /** When the INVITE arrived (performance.now()), for setup-time measurements. */
  readonly receivedAt: number;
  readonly dialog: SignalingDialog;
  /**
   * Answers with an SDP built from the offer, the tenant's codec preference and callgate's media
   * address. When nothing is common the call is rejected with 488 and the result says so. Without
   * an offer (delayed offer) the 200 carries callgate's offer of the tenant's codecs instead, and
   * the answer arrives with the ACK (see `answerPending` and the `ack` event).
   */
  accept(options: { readonly local: LocalMediaAddress }): AcceptResult;
  /** Sends 180 Ringing. */
  ring(): void;
  /**
   * Rejects the call with a final status (4xx-6xx); `headers` go on the response (Retry-After on
   * a 503 from admission, gateway/call/call-admission.ts).
   */
  reject(status: number, reason?: string, headers?: readonly SipHeader[]): void;
}

export type InboundCallHandler = (call: InboundCall) => void;

/** Whether a driver can carry calls now; `reason` goes into /readyz's failing checks. */
export type DriverReadiness =
  { readonly ready: true } | { readonly ready: false; readonly reason: string };

export interface SignalingDriver {
  readonly name: 'builtin' | 'drachtio';
  /** Registers the application's handler; a call arriving without one is answered 480. */
  onCall(handler: InboundCallHandler): void;
  start(): Promise<void>;
  /** Ends every dialog with BYE (reason `shutdown`) and closes the sockets. */
  stop(): Promise<void>;
  /** Sends OPTIONS out of dialog (a trunk keepalive); resolves with the status, or 408. */
  ping(target: string): Promise<number>;
  /**
   * Readiness check `sip` (gateway/call/start-call-gateway.ts): the built-in stack once its
   * sockets are bound, the drachtio driver while it is connected and authenticated.
   */
  readiness(): DriverReadiness;
  /** Resolves the next time the driver is ready (at once when it is); "callgate ready" waits on it. */
  whenReady(): Promise<void>;
}
