/**
 * Selects the tenant and agent for a called number. Numbers are compared without visual
 * separators, and with and without a leading `+`, so `tel:+1-555-0100` finds `+15550100`.
 */
import type { TenantConfig } from '../../config/schema.ts';
import type { SipRequest } from './message-types.ts';

export interface CallRoute {
  readonly tenant: TenantConfig;
  readonly agent: string;
  readonly number: string;
}

export class CallRouter {
  private readonly byNumber = new Map<string, TenantConfig>();

  constructor(tenants: readonly TenantConfig[]) {
    for (const tenant of tenants) {
      for (const number of tenant.numbers) this.byNumber.set(normalize(number), tenant);
    }
  }

  /** The called number: the Request-URI user, else the To URI user (RFC 3261 leaves either to the UAS). */
  static calledNumber(request: SipRequest): string | undefined {
    const fromUri = (uri: SipRequest['uri']): string | undefined =>
      uri.scheme === 'tel' ? uri.number : uri.user;
    return fromUri(request.uri) ?? fromUri(request.to.uri);
  }

  route(number: string): CallRoute | undefined {
    const key = normalize(number);
    const tenant =
      this.byNumber.get(key) ?? this.byNumber.get(key.startsWith('+') ? key.slice(1) : `+${key}`);
    return tenant === undefined ? undefined : { tenant, agent: tenant.agent, number };
  }
}

function normalize(number: string): string {
  return number.replace(/[\s\-.()]/g, '');
}
