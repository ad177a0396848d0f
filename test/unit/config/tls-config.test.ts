/**
 * The SIP/TLS settings at load: a tenant's trunk identity needs a name or a fingerprint, mutual
 * TLS counts as knowing the trunk (and needs the TLS listener), tls in sip.transports needs a
 * certificate and key, and every TLS file that cannot be read or holds no PEM of its kind is a
 * problem listed by path with the others (config/tls-files.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../config/load.ts';
import type { Config } from '../../../config/schema.ts';
import { makeTestPki, type TestPki } from '../../support/tls-certs.ts';

let pki: TestPki;

beforeAll(() => {
  pki = makeTestPki();
  writeFileSync(join(pki.dir, 'notes.txt'), 'not a PEM file\n');
  mkdirSync(join(pki.dir, 'a-folder'));
});

afterAll(() => pki.close());

const OPEN_TENANT = { id: 'open', numbers: ['1000'], agent: 'concierge', trunk: { open: true } };

function load(document: Record<string, unknown>, baseDir?: string): Config {
  return loadConfig({ document, env: {}, ...(baseDir !== undefined ? { baseDir } : {}) });
}

function problemsOf(document: Record<string, unknown>, baseDir?: string): readonly string[] {
  try {
    load(document, baseDir);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const tlsSip = (tls: Record<string, unknown>): Record<string, unknown> => ({
  transports: ['udp', 'tls'],
  tlsPort: 0,
  tls,
});
const goodSip = (): Record<string, unknown> =>
  tlsSip({ certFile: pki.serverCert, keyFile: pki.serverKey });

describe('when a tenant names its trunk TLS identity', () => {
  const tenantWith = (tls: Record<string, unknown>) => ({ ...OPEN_TENANT, tls });

  it('should refuse one with neither name nor fingerprint', () => {
    expect(problemsOf({ tenants: [tenantWith({ caFile: pki.caCert })] })).toEqual([
      'tenants[0].tls: must name the trunk: set name (its certificate name) or fingerprint (SHA-256)',
    ]);
  });

  it.each([
    ['a name', () => ({ name: 'trunk.example' })],
    ['a fingerprint in pairs', () => ({ fingerprint: 'ab:'.repeat(31) + 'ab' })],
    ['a fingerprint of 64 hex digits', () => ({ fingerprint: 'AB'.repeat(32) })],
  ])('should accept %s', (_what, named) => {
    expect(problemsOf({ tenants: [tenantWith({ caFile: pki.caCert, ...named() })] })).toEqual([]);
  });

  it.each([
    ['too short', 'ab:cd'],
    ['a SHA-1 fingerprint', 'ab:'.repeat(19) + 'ab'],
    ['not hex', 'zz'.repeat(32)],
  ])('should refuse a fingerprint that is %s', (_what, fingerprint) => {
    expect(problemsOf({ tenants: [tenantWith({ caFile: pki.caCert, fingerprint })] })).toEqual([
      'tenants[0].tls.fingerprint: must be a SHA-256 fingerprint (64 hex digits, optionally in pairs separated by :)',
    ]);
  });
});

describe('when a tenant authenticates its trunk by mutual TLS', () => {
  const mutualTenant = (mutual: boolean) => ({
    id: 'secure',
    numbers: ['2000'],
    agent: 'concierge',
    tls: { caFile: pki.caCert, name: 'trunk.example', mutual },
  });

  it('should count it as a closed trunk, with no allowFrom, digest or open', () => {
    const config = load({ sip: goodSip(), tenants: [mutualTenant(true)] });
    expect(config.tenants[0]?.trunk).toMatchObject({ open: false });
    expect(config.tenants[0]?.tls?.mutual).toBe(true);
  });

  it('should not count a TLS identity without mutual as knowing who calls', () => {
    expect(problemsOf({ sip: goodSip(), tenants: [mutualTenant(false)] })).toEqual([
      'tenants[0].trunk: must say who may call: set trunk.allowFrom (source addresses), trunk.digest (SIP digest authentication), tls.mutual (client certificates), or trunk.open: true (calls from anyone)',
    ]);
  });

  it('should refuse mutual TLS without the TLS listener, which no call could reach', () => {
    expect(problemsOf({ tenants: [mutualTenant(true)] })).toEqual([
      'tenants[0].tls.mutual: needs sip.transports to list tls: no call could present a client certificate',
    ]);
  });

  it('should refuse open: true beside mutual TLS, which it would contradict', () => {
    const tenant = { ...mutualTenant(true), trunk: { open: true } };
    expect(problemsOf({ sip: goodSip(), tenants: [tenant] })).toEqual([
      'tenants[0].trunk.open: contradicts allowFrom/digest/tls.mutual: drop open, or drop allowFrom, digest and tls.mutual',
    ]);
  });
});

describe('when sip.transports lists tls', () => {
  it('should refuse it without sip.tls, saying which files to set', () => {
    expect(problemsOf({ sip: { transports: ['udp', 'tls'] }, tenants: [OPEN_TENANT] })).toEqual([
      'sip.tls: required when sip.transports lists tls: set sip.tls.certFile and sip.tls.keyFile (PEM files)',
    ]);
  });

  it('should refuse sip.tls without a key file', () => {
    expect(
      problemsOf({ sip: tlsSip({ certFile: pki.serverCert }), tenants: [OPEN_TENANT] }),
    ).toEqual([expect.stringMatching(/^sip\.tls\.keyFile: /)]);
  });

  it('should take the defaults of the limits', () => {
    expect(load({ sip: goodSip(), tenants: [OPEN_TENANT] }).sip.tls).toEqual({
      certFile: pki.serverCert,
      keyFile: pki.serverKey,
      handshakeTimeoutMs: 5_000,
      maxConnectionsPerSource: 64,
      maxHandshakesPerSource: 8,
      reloadIntervalMs: 10_000,
    });
  });
});

describe('when a TLS file cannot be used', () => {
  it('should list every unreadable or wrong file by path, together', () => {
    const sip = tlsSip({
      certFile: join(pki.dir, 'missing.pem'),
      keyFile: join(pki.dir, 'a-folder'),
      caFile: join(pki.dir, 'notes.txt'),
    });
    const tenant = { ...OPEN_TENANT, tls: { caFile: pki.serverKey, name: 'trunk.example' } };
    expect(problemsOf({ sip, tenants: [tenant] })).toEqual([
      `sip.tls.certFile: cannot read ${join(pki.dir, 'missing.pem')}: ENOENT`,
      `sip.tls.keyFile: cannot read ${join(pki.dir, 'a-folder')}: EISDIR`,
      `sip.tls.caFile: ${join(pki.dir, 'notes.txt')} holds no PEM certificate`,
      `tenants[0].tls.caFile: ${pki.serverKey} holds no PEM certificate`,
    ]);
  });

  it('should refuse a certificate where the key belongs, and a key where the certificate does', () => {
    const sip = tlsSip({ certFile: pki.serverKey, keyFile: pki.serverCert });
    expect(problemsOf({ sip, tenants: [OPEN_TENANT] })).toEqual([
      `sip.tls.certFile: ${pki.serverKey} holds no PEM certificate`,
      `sip.tls.keyFile: ${pki.serverCert} holds no PEM private key`,
    ]);
  });

  it('should not read sip.tls files while tls is not among the transports', () => {
    const sip = { tls: { certFile: join(pki.dir, 'missing.pem'), keyFile: 'missing.key' } };
    expect(problemsOf({ sip, tenants: [OPEN_TENANT] })).toEqual([]);
  });

  it("should read relative paths from the configuration's folder", () => {
    const sip = tlsSip({ certFile: 'server.pem', keyFile: 'server.key', caFile: 'ca.pem' });
    const tenant = { ...OPEN_TENANT, tls: { caFile: 'ca.pem', name: 'trunk.example' } };
    const config = load({ sip, tenants: [tenant] }, pki.dir);
    expect(config.sip.tls).toMatchObject({
      certFile: pki.serverCert,
      keyFile: pki.serverKey,
      caFile: pki.caCert,
    });
    expect(config.tenants[0]?.tls?.caFile).toBe(pki.caCert);
  });
});
