/**
 * Builds the configured providers: `sandbox` entries talk to the embedded sandbox (or the
 * `baseUrl` of one running elsewhere), `http` entries to a real system of record with a bearer
 * token read from the environment variable the configuration names.
 */
import { CallgateError } from '../../config/errors.ts';
import type { Config } from '../../config/schema.ts';
import { HttpProvider } from './http-provider.ts';
import type { Provider } from './provider.ts';
import { SandboxProvider } from './sandbox-provider.ts';

export interface ProviderRegistryOptions {
  /** URL of the embedded sandbox; required when a sandbox provider has no baseUrl. */
  readonly sandboxUrl?: string;
  /** Where token variables are read; process.env unless set (tests pass their own). */
  readonly env?: NodeJS.ProcessEnv;
}

export function createProviders(
  config: Pick<Config, 'providers'>,
  options: ProviderRegistryOptions = {},
): Map<string, Provider> {
  const env = options.env ?? process.env;
  const providers = new Map<string, Provider>();
  for (const [name, entry] of Object.entries(config.providers)) {
    if (entry.type === 'sandbox') {
      const sandboxUrl = entry.baseUrl ?? options.sandboxUrl;
      if (sandboxUrl === undefined)
        throw new CallgateError('CALLGATE_ERR_PROVIDER_NO_SANDBOX', { provider: name });
      providers.set(
        name,
        new SandboxProvider({
          name,
          sandboxUrl,
          service: entry.service,
          timeoutMs: entry.timeoutMs,
        }),
      );
      continue;
    }
    let token: string | undefined;
    if (entry.tokenEnv !== undefined) {
      token = env[entry.tokenEnv];
      if (token === undefined || token === '')
        throw new CallgateError('CALLGATE_ERR_PROVIDER_NO_TOKEN', {
          provider: name,
          env: entry.tokenEnv,
        });
    }
    providers.set(
      name,
      new HttpProvider({
        name,
        baseUrl: entry.baseUrl,
        honoursIdempotencyKeys: entry.honoursIdempotencyKeys,
        supportsCancel: entry.supportsCancel,
        supportsLookup: entry.supportsLookup,
        supportsVoid: entry.supportsVoid,
        timeoutMs: entry.timeoutMs,
        ...(token === undefined ? {} : { token }),
      }),
    );
  }
  return providers;
}
