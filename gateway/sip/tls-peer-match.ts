/**
 * Whether a TLS peer is the trunk a tenant names: its certificate chains to the tenant's CA
 * bundle, is within its validity, and carries the expected name or SHA-256 fingerprint. Pure
 * (certificates in, a verdict out); the files are read by gateway/sip/tls-credentials.ts.
 * Pinned by test/unit/sip/tls-peer-match.test.ts.
 */
import type { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';

/** What a tenant expects of its trunk's certificate (tenants[].tls). */
export interface PeerExpectation {
  readonly name?: string;
  readonly fingerprint?: string;
}

/** A tenant's trust in its trunk: the CA bundle (parsed, and as PEM for node:tls) and the names. */
export interface PeerTrust extends PeerExpectation {
  readonly cas: readonly X509Certificate[];
  readonly caPem: string;
}

/** Why a peer is not the trunk: it sent no certificate, one no trusted CA issued, or another one. */
export type PeerRefusal = 'tls-no-certificate' | 'tls-untrusted' | 'tls-mismatch';

/** `ab:cd...`, `ABCD...` and `AB:CD...` are the same fingerprint: upper-case pairs joined by ':'. */
export function normalizeFingerprint(text: string): string {
  const hex = text.replace(/:/g, '').toUpperCase();
  return (hex.match(/.{2}/g) ?? []).join(':');
}

/** The certificate has the expected fingerprint and name (each only when expected). */
export function matchesExpectation(cert: X509Certificate, expected: PeerExpectation): boolean {
  if (
    expected.fingerprint !== undefined &&
    normalizeFingerprint(cert.fingerprint256) !== normalizeFingerprint(expected.fingerprint)
  )
    return false;
  if (expected.name !== undefined) {
    const name = expected.name.replace(/^\[|\]$/g, '');
    const found = isIP(name) !== 0 ? cert.checkIP(name) : cert.checkHost(name);
    if (found === undefined) return false;
  }
  return true;
}

/**
 * The chain (leaf first, as the peer sent it) leads from the leaf to a certificate one of `cas`
 * issued and signed, through intermediates that are CAs, each valid at `now`. A leaf that is
 * itself in `cas` (a pinned self-signed certificate) is trusted as is.
 */
export function chainVerifies(
  chain: readonly X509Certificate[],
  cas: readonly X509Certificate[],
  now: Date,
): boolean {
  let current = chain[0];
  for (let step = 0; current !== undefined && step <= chain.length; step++) {
    if (!validAt(current, now)) return false;
    const cert: X509Certificate = current;
    if (cas.some((ca) => ca.fingerprint256 === cert.fingerprint256)) return true;
    const anchor = cas.find((ca) => issued(ca, cert));
    if (anchor !== undefined) return validAt(anchor, now);
    current = chain.find((next) => next !== cert && next.ca && issued(next, cert));
  }
  return false;
}

/** Undefined when `chain` is the trusted trunk; else why not. */
export function peerRefusal(
  chain: readonly X509Certificate[],
  trust: PeerTrust,
  now: Date,
): PeerRefusal | undefined {
  const leaf = chain[0];
  if (leaf === undefined) return 'tls-no-certificate';
  if (!chainVerifies(chain, trust.cas, now)) return 'tls-untrusted';
  return matchesExpectation(leaf, trust) ? undefined : 'tls-mismatch';
}

function issued(issuer: X509Certificate, subject: X509Certificate): boolean {
  return subject.checkIssued(issuer) && subject.verify(issuer.publicKey);
}

function validAt(cert: X509Certificate, now: Date): boolean {
  const t = now.getTime();
  return Date.parse(cert.validFrom) <= t && t <= Date.parse(cert.validTo);
}
