/** A tenant says who may call it (allowlist, digest) or declares itself open; else load fails. */
import { describe, expect, it } from 'vitest';
import { ConfigError, EXAMPLE_CONFIG_PATH, loadConfig } from '../../../config/load.ts';

function problemsOf(trunk: Record<string, unknown> | undefined): readonly string[] {
  const document = {
    tenants: [{ id: 'demo', numbers: ['1000'], agent: 'concierge', ...(trunk && { trunk }) }],
  };
  try {
    loadConfig({ document, env: {} });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.filter((p) => p.includes('trunk'));
    throw error;
  }
  return [];
}

const THREE_WAYS =
  'tenants[0].trunk: must say who may call: set trunk.allowFrom (source addresses), trunk.digest (SIP digest authentication), tls.mutual (client certificates), or trunk.open: true (calls from anyone)';

describe('when a tenant names no way its callers are known', () => {
  it.each([
    ['no trunk at all', undefined],
    ['an empty trunk', {}],
    ['an empty allowlist', { allowFrom: [] }],
    ['open set to false', { open: false }],
  ])('should refuse %s at load, by path, naming the three ways', (_what, trunk) => {
    expect(problemsOf(trunk)).toEqual([THREE_WAYS]);
  });
});

describe('when a tenant names its callers or declares itself open', () => {
  it.each([
    ['a source allowlist', { allowFrom: ['192.0.2.0/24'] }],
    ['digest authentication', { digest: { realm: 'r', username: 'u', passwordEnv: 'PW' } }],
    ['both', { allowFrom: ['::1/128'], digest: { realm: 'r', username: 'u', passwordEnv: 'PW' } }],
    ['open: true', { open: true }],
  ])('should accept %s', (_what, trunk) => {
    expect(problemsOf(trunk)).toEqual([]);
  });

  it('should refuse open: true beside an allowlist or digest, which it would contradict', () => {
    expect(problemsOf({ open: true, allowFrom: ['192.0.2.0/24'] })).toEqual([
      'tenants[0].trunk.open: contradicts allowFrom/digest/tls.mutual: drop open, or drop allowFrom, digest and tls.mutual',
    ]);
  });

  it('should not trust asserted identities from an open trunk', () => {
    expect(problemsOf({ open: true, trustAssertedIdentity: true })).toEqual([
      'tenants[0].trunk.trustAssertedIdentity: needs allowFrom, digest or tls.mutual: an identity is trusted only from a known trunk',
    ]);
  });
});

describe('when npm start loads the embedded defaults', () => {
  it('should take calls from loopback sources only, not from anyone', () => {
    const config = loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} });
    expect(config.tenants.map((t) => t.trunk)).toEqual([
      { allowFrom: ['127.0.0.0/8', '::1/128'], open: false, trustAssertedIdentity: false },
    ]);
  });
});
