/** An inbound call as the built-in stack hands it to the application. */
import type { TenantConfig } from '../../config/schema.ts';
import type { CallerIdentity } from './caller-identity.ts';
import type { LocalMediaAddress } from './local-media.ts';
import type { SipHeader, SipRequest } from './message-types.ts';
import type { SdpSession } from './sdp-types.ts';
import type { AcceptResult, InboundCall } from './signaling-driver.ts';
import type { SipDialog } from './sip-dialog.ts';
import type { SipEndpoint, TransportName } from './sip-transport.ts';
import { formatUri } from './message-serializer.ts';

export interface BuiltinInboundCallOptions {
  readonly request: SipRequest;
  readonly dialog: SipDialog;
  readonly calledNumber: string;
  readonly identity: CallerIdentity;
  readonly tenant: TenantConfig;
  readonly agent: string;
  readonly offer: SdpSession | undefined;
  readonly source: SipEndpoint;
  readonly receivedAt: number;
}

export class BuiltinInboundCall implements InboundCall {
  readonly callId: string;
  readonly caller: { readonly uri: string; readonly user?: string; readonly displayName?: string };
  readonly identity: CallerIdentity;
  readonly calledNumber: string;
  readonly tenant: TenantConfig;
  readonly agent: string;
  readonly headers: readonly SipHeader[];
  readonly offer: SdpSession | undefined;
  readonly source: {
    readonly address: string;
    readonly port: number;
    readonly transport: TransportName;
  };
  readonly receivedAt: number;
  readonly dialog: SipDialog;

  constructor(options: BuiltinInboundCallOptions) {
    const from = options.request.from;
    const user = from.uri.scheme === 'tel' ? from.uri.number : from.uri.user;
    this.callId = options.request.callId;
    this.caller = {
      uri: formatUri(from.uri),
      ...(user !== undefined ? { user } : {}),
      ...(from.displayName !== undefined ? { displayName: from.displayName } : {}),
    };
    this.identity = options.identity;
    this.calledNumber = options.calledNumber;
    this.tenant = options.tenant;
    this.agent = options.agent;
    this.headers = options.request.headers;
    this.offer = options.offer;
    this.source = {
      address: options.source.address,
      port: options.source.port,
      transport: options.source.transport,
    };
    this.receivedAt = options.receivedAt;
    this.dialog = options.dialog;
  }

  accept(options: { readonly local: LocalMediaAddress }): AcceptResult {
    return this.dialog.accept(options.local, this.offer);
  }

  ring(): void {
    this.dialog.ring();
  }

  reject(status: number, reason?: string, headers: readonly SipHeader[] = []): void {
    this.dialog.reject(status < 400 || status > 699 ? 500 : status, reason, headers);
  }
}
