/**
 * An adapter for one service of the bundled sandbox. The sandbox speaks the generic HTTP
 * provider convention under /{service}, so this is an HttpProvider with the service's
 * declarations fixed: bookings honour idempotency keys, payments do not (a repeated refund is a
 * second refund). Both support cancel of a request in progress, voiding attempts by their tokens
 * and lookup by operation id; bookings also by idempotency key, for a request that reached the
 * sandbox under another id.
 */
import { HttpProvider } from './http-provider.ts';
import type { LookupResult, ProviderRequest } from './provider.ts';

export type SandboxServiceName = 'bookings' | 'payments';

export interface SandboxProviderOptions {
  readonly name: string;
  /** The sandbox's base URL (without the service path). */
  readonly sandboxUrl: string;
  readonly service: SandboxServiceName;
  readonly timeoutMs: number;
}

export class SandboxProvider extends HttpProvider {
  readonly service: SandboxServiceName;

  constructor(options: SandboxProviderOptions) {
    super({
      name: options.name,
      baseUrl: `${options.sandboxUrl.replace(/\/$/, '')}/${options.service}`,
      honoursIdempotencyKeys: options.service === 'bookings',
      supportsCancel: true,
      supportsVoid: true,
      timeoutMs: options.timeoutMs,
    });
    this.service = options.service;
  }

  override async lookup(request: Omit<ProviderRequest, 'params'>): Promise<LookupResult> {
    const byId = await super.lookup(request);
    if (byId.status !== 'not_found' || !this.honoursIdempotencyKeys) return byId;
    return this.lookupAt(
      `operations?idempotency_key=${encodeURIComponent(request.idempotencyKey)}`,
      request,
    );
  }
}
