/**
 * Whether a TLS peer is the trunk a tenant names, over certificates made by openssl: the expected
 * name in subjectAltName (DNS, IP) or, without DNS names, in the CN; fingerprints in any case and
 * with or without colons; the chain to the tenant's CA, through intermediates that are CAs, within
 * validity; and the reason a peer is refused.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chainVerifies,
  matchesExpectation,
  normalizeFingerprint,
  peerRefusal,
  type PeerTrust,
} from '../../../gateway/sip/tls-peer-match.ts';
import { makeCa, makeTestPki, signCertificate, type TestPki } from '../../support/tls-certs.ts';

let pki: TestPki;
const cert = (file: string): X509Certificate => new X509Certificate(readFileSync(file));

/** A certificate `stem` signed by `issuer` (a stem in pki.dir), with the given extensions. */
function sign(stem: string, subject: string, issuer: string, extensions: string): X509Certificate {
  signCertificate(pki.dir, issuer, stem, subject, extensions);
  return cert(join(pki.dir, `${stem}.pem`));
}

/** A self-signed CA `stem` with subject `cn`. */
function selfSignedCa(stem: string, cn: string): X509Certificate {
  makeCa(pki.dir, stem, cn, ['basicConstraints=critical,CA:TRUE']);
  return cert(join(pki.dir, `${stem}.pem`));
}

let ca: X509Certificate;
let wrongCa: X509Certificate;
let server: X509Certificate;
let client: X509Certificate;
let cnOnly: X509Certificate;
let cnIpOnly: X509Certificate;
let sanDiffers: X509Certificate;
let wildcard: X509Certificate;
let ipv6: X509Certificate;
let intermediate: X509Certificate;
let viaIntermediate: X509Certificate;
let viaLeaf: X509Certificate;
let forged: X509Certificate;
/** Taken after every certificate was made: each is valid from the second it was signed. */
let now: Date;

beforeAll(() => {
  pki = makeTestPki();
  ca = cert(pki.caCert);
  wrongCa = cert(pki.wrongCaCert);
  server = cert(pki.serverCert);
  client = cert(pki.clientCert);
  const leaf = 'basicConstraints=CA:FALSE\n';
  cnOnly = sign('cn-only', '/CN=cn-only.example', 'ca', leaf);
  cnIpOnly = sign('cn-ip', '/CN=192.0.2.7', 'ca', leaf);
  sanDiffers = sign(
    'san-differs',
    '/CN=cn.example',
    'ca',
    `${leaf}subjectAltName=DNS:san.example\n`,
  );
  wildcard = sign('wildcard', '/CN=wild', 'ca', `${leaf}subjectAltName=DNS:*.trunks.example\n`);
  ipv6 = sign('ipv6', '/CN=v6', 'ca', `${leaf}subjectAltName=IP:2001:db8::7\n`);
  intermediate = sign(
    'intermediate',
    '/CN=intermediate',
    'ca',
    'basicConstraints=critical,CA:TRUE\n',
  );
  viaIntermediate = sign('via-intermediate', '/CN=deep.example', 'intermediate', leaf);
  // A leaf used as an issuer: it is no CA, so what it signs chains to nothing.
  viaLeaf = sign('via-leaf', '/CN=sub.example', 'server', leaf);
  // Another key under the good CA's name: the issuer name matches, the signature does not.
  selfSignedCa('impostor-ca', 'callgate test CA');
  forged = sign(
    'forged',
    '/CN=trunk.example',
    'impostor-ca',
    `${leaf}subjectAltName=DNS:trunk.example\n`,
  );
  now = new Date();
});

afterAll(() => pki.close());

const DAY_MS = 86_400_000;

describe('when a fingerprint is written', () => {
  const pairs =
    'AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89';

  it.each([
    ['upper-case pairs', pairs],
    ['lower-case pairs', pairs.toLowerCase()],
    ['upper-case hex without colons', pairs.replace(/:/g, '')],
    ['lower-case hex without colons', pairs.replace(/:/g, '').toLowerCase()],
    ['mixed case', 'aB:Cd:' + pairs.slice(6)],
  ])('should normalize %s to upper-case pairs joined by ":"', (_what, text) => {
    expect(normalizeFingerprint(text)).toBe(pairs);
  });

  it.each([
    [
      'the same, in lower case without colons',
      () => server.fingerprint256.replace(/:/g, '').toLowerCase(),
      true,
    ],
    ['the same, as node:crypto gives it', () => server.fingerprint256, true],
    ['another certificate', () => client.fingerprint256, false],
    ['a SHA-1 fingerprint of the same certificate', () => server.fingerprint, false],
  ])('should match the peer certificate against %s', (_what, fingerprint, matches) => {
    expect(matchesExpectation(server, { fingerprint: fingerprint() })).toBe(matches);
  });
});

describe('when a tenant names its trunk', () => {
  it.each([
    ['a DNS name in subjectAltName', () => client, 'trunk.example', true],
    ['a DNS name in another case', () => client, 'TRUNK.Example', true],
    ['an IPv4 address in subjectAltName', () => server, '127.0.0.1', true],
    ['an IPv6 address in subjectAltName', () => ipv6, '2001:db8::7', true],
    ['an IPv6 address in brackets', () => ipv6, '[2001:db8::7]', true],
    ['another IPv4 address', () => server, '127.0.0.2', false],
    ['another DNS name', () => client, 'other.example', false],
    ['the CN of a certificate without subjectAltName', () => cnOnly, 'cn-only.example', true],
    ['the CN beside subjectAltName DNS names', () => sanDiffers, 'cn.example', false],
    ['the DNS name beside a different CN', () => sanDiffers, 'san.example', true],
    ['an IP address only in the CN', () => cnIpOnly, '192.0.2.7', false],
    ['one label under a wildcard', () => wildcard, 'a.trunks.example', true],
    ['the wildcard base itself', () => wildcard, 'trunks.example', false],
    ['two labels under a wildcard', () => wildcard, 'a.b.trunks.example', false],
  ])('should judge %s', (_what, peer, name, matches) => {
    expect(matchesExpectation(peer(), { name })).toBe(matches);
  });

  it('should need both the name and the fingerprint when both are set', () => {
    expect(
      matchesExpectation(client, { name: 'trunk.example', fingerprint: client.fingerprint256 }),
    ).toBe(true);
    expect(
      matchesExpectation(client, { name: 'trunk.example', fingerprint: server.fingerprint256 }),
    ).toBe(false);
    expect(
      matchesExpectation(client, { name: 'other.example', fingerprint: client.fingerprint256 }),
    ).toBe(false);
  });

  it('should take any certificate when it expects neither', () => {
    expect(matchesExpectation(client, {})).toBe(true);
  });
});

describe('when a peer presents a chain', () => {
  it.each([
    ['a leaf the CA issued', () => [client], () => [ca], () => now, true],
    ['a leaf another CA issued', () => [client], () => [wrongCa], () => now, false],
    [
      'a leaf of another CA, with that CA in the chain',
      () => [cert(pki.wrongClientCert), wrongCa],
      () => [ca],
      () => now,
      false,
    ],
    [
      'a leaf through an intermediate it sent',
      () => [viaIntermediate, intermediate],
      () => [ca],
      () => now,
      true,
    ],
    [
      'a leaf whose intermediate it did not send',
      () => [viaIntermediate],
      () => [ca],
      () => now,
      false,
    ],
    ['a leaf signed by a leaf', () => [viaLeaf, server], () => [ca], () => now, false],
    ['a leaf under the CA name but another key', () => [forged], () => [ca], () => now, false],
    ['a pinned self-signed certificate', () => [wrongCa], () => [wrongCa], () => now, true],
    ['a leaf with the CA among several', () => [client], () => [wrongCa, ca], () => now, true],
    [
      'a leaf past its validity',
      () => [client],
      () => [ca],
      () => new Date(now.getTime() + 5 * DAY_MS),
      false,
    ],
    [
      'a leaf not yet valid',
      () => [client],
      () => [ca],
      () => new Date(now.getTime() - 5 * DAY_MS),
      false,
    ],
    ['no certificate', () => [], () => [ca], () => now, false],
  ])('should judge %s', (_what, chain, cas, at, verifies) => {
    expect(chainVerifies(chain(), cas(), at())).toBe(verifies);
  });
});

describe('when a peer is not the trunk', () => {
  const trust = (expect: { name?: string; fingerprint?: string }): PeerTrust => ({
    cas: [ca],
    caPem: readFileSync(pki.caCert, 'utf8'),
    ...expect,
  });

  it.each([
    ['no certificate', () => [], () => ({ name: 'trunk.example' }), 'tls-no-certificate'],
    [
      'a certificate of another CA',
      () => [cert(pki.wrongClientCert)],
      () => ({ name: 'trunk.example' }),
      'tls-untrusted',
    ],
    ['a forged issuer', () => [forged], () => ({ name: 'trunk.example' }), 'tls-untrusted'],
    [
      'a certificate of its CA with another name',
      () => [server],
      () => ({ name: 'trunk.example' }),
      'tls-mismatch',
    ],
    [
      'a certificate of its CA with another fingerprint',
      () => [server],
      () => ({ fingerprint: client.fingerprint256 }),
      'tls-mismatch',
    ],
    ['its trunk by name', () => [client], () => ({ name: 'trunk.example' }), undefined],
    [
      'its trunk by fingerprint',
      () => [client],
      () => ({ fingerprint: client.fingerprint256.toLowerCase() }),
      undefined,
    ],
  ])('should say why for %s', (_what, chain, expected, refusal) => {
    expect(peerRefusal(chain(), trust(expected()), now)).toBe(refusal);
  });
});
