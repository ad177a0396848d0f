import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { providerSchema } from '../../../config/schema.ts';
import { HttpProvider } from '../../../jobs/providers/http-provider.ts';
import { createProviders } from '../../../jobs/providers/registry.ts';
import { SandboxProvider } from '../../../jobs/providers/sandbox-provider.ts';

const providers = {
  bookings: providerSchema.parse({ type: 'sandbox', service: 'bookings' }),
  payments: providerSchema.parse({
    type: 'sandbox',
    service: 'payments',
    baseUrl: 'http://10.0.0.9:7000',
  }),
  crm: providerSchema.parse({
    type: 'http',
    baseUrl: 'https://crm.example.com/v1',
    honoursIdempotencyKeys: true,
    supportsCancel: true,
    tokenEnv: 'CRM_TOKEN',
  }),
};

describe('when providers are created from the configuration', () => {
  it('should build one adapter per entry with its declarations', async () => {
    const made = createProviders(
      { providers },
      { sandboxUrl: 'http://127.0.0.1:1234', env: { CRM_TOKEN: 'secret-token' } },
    );
    expect([...made.keys()]).toEqual(['bookings', 'payments', 'crm']);
    const bookings = made.get('bookings');
    const payments = made.get('payments');
    const crm = made.get('crm');
    expect(bookings).toBeInstanceOf(SandboxProvider);
    expect(bookings).toMatchObject({
      name: 'bookings',
      honoursIdempotencyKeys: true,
      supportsCancel: true,
      supportsLookup: true,
    });
    expect(payments).toMatchObject({ name: 'payments', honoursIdempotencyKeys: false });
    expect(crm).toBeInstanceOf(HttpProvider);
    expect(crm).toMatchObject({ honoursIdempotencyKeys: true, supportsCancel: true });
    for (const provider of made.values()) await provider.close?.();
  });

  it('should refuse a sandbox entry without a baseUrl when no sandbox runs', () => {
    let error: unknown;
    try {
      createProviders({ providers: { bookings: providers.bookings } });
    } catch (e) {
      error = e;
    }
    expect(isCallgateError(error, 'CALLGATE_ERR_PROVIDER_NO_SANDBOX')).toBe(true);
  });

  it('should refuse an http entry whose token variable is unset', () => {
    let error: unknown;
    try {
      createProviders({ providers: { crm: providers.crm } }, { env: {} });
    } catch (e) {
      error = e;
    }
    expect(isCallgateError(error, 'CALLGATE_ERR_PROVIDER_NO_TOKEN')).toBe(true);
    expect((error as Error).message).toContain('CRM_TOKEN');
  });
});
