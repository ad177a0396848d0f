/**
 * The files behind SIP over TLS: callgate's own certificate and key (sip.tls), re-read when they
 * change so a renewed certificate needs no restart, and each tenant's CA bundle (tenants[].tls).
 * A new pair that does not load (a half-written file, a key of another certificate) is reported
 * and the pair in use stays (test/integration/sip/tls-certificate-reload.test.ts).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { SipConfig, TenantConfig } from '../../config/schema.ts';
import type { PeerTrust } from './tls-peer-match.ts';

export type SipTlsFiles = Pick<NonNullable<SipConfig['tls']>, 'certFile' | 'keyFile' | 'caFile'>;

/** A certificate and key that load together, as PEM, with the certificate's fingerprint for logs. */
export interface ServerCredentials {
  readonly cert: string;
  readonly key: string;
  /** SHA-256 of the leaf certificate, upper-case pairs joined by ':'. */
  readonly fingerprint: string;
}

/** Reads certificate and key; throws, saying which file, when they do not make a usable pair. */
export function readServerCredentials(files: SipTlsFiles): ServerCredentials {
  const cert = readFileSync(files.certFile, 'utf8');
  const key = readFileSync(files.keyFile, 'utf8');
  const leaf = splitPem(cert)[0];
  if (leaf === undefined) throw new Error(`${files.certFile} holds no PEM certificate`);
  // createSecureContext takes an empty key for none, and the listener would then fail every
  // handshake (test/integration/sip/tls-certificate-reload.test.ts).
  if (key.length === 0) throw new Error(`${files.keyFile} is empty`);
  try {
    // Throws on a key that is not the certificate's, or on unreadable PEM.
    createSecureContext({ cert, key });
  } catch (error) {
    throw new Error(
      `${files.certFile} and ${files.keyFile} do not load as a pair: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return { cert, key, fingerprint: leaf.fingerprint256 };
}

/** The certificates of a PEM bundle, in order; blocks that do not parse are left out. */
export function splitPem(text: string): X509Certificate[] {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  const certificates: X509Certificate[] = [];
  for (const block of blocks) {
    try {
      certificates.push(new X509Certificate(block));
    } catch {
      // A damaged block trusts nothing.
    }
  }
  return certificates;
}

/** A PEM CA bundle read as text and as certificates. */
export function readCaBundle(path: string): { pem: string; cas: X509Certificate[] } {
  const pem = readFileSync(path, 'utf8');
  return { pem, cas: splitPem(pem) };
}

/** Each tenant's trust in its trunk, by tenant id (tenants without `tls` are absent). */
export function readPeerTrusts(tenants: readonly TenantConfig[]): Map<string, PeerTrust> {
  const trusts = new Map<string, PeerTrust>();
  for (const tenant of tenants) {
    const tls = tenant.tls;
    if (tls === undefined) continue;
    const { pem, cas } = readCaBundle(tls.caFile);
    trusts.set(tenant.id, {
      cas,
      caPem: pem,
      ...(tls.name !== undefined ? { name: tls.name } : {}),
      ...(tls.fingerprint !== undefined ? { fingerprint: tls.fingerprint } : {}),
    });
  }
  return trusts;
}

export interface CredentialWatchOptions {
  readonly files: SipTlsFiles;
  readonly intervalMs: number;
  readonly onChange: (credentials: ServerCredentials) => void;
  readonly onError: (error: Error) => void;
}

/**
 * Polls certificate and key for a change. Polling, not fs.watch: a Kubernetes Secret volume
 * swaps a symlink, which inotify on the file itself never reports, while stat follows it.
 */
export class CredentialWatch {
  private timer: NodeJS.Timeout | undefined;
  private seen: string;

  constructor(private readonly options: CredentialWatchOptions) {
    this.seen = this.signature();
  }

  start(): void {
    this.timer = setInterval(() => this.poll(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Loads the pair once it changed; a pair that fails is tried again only after the next change. */
  poll(): void {
    const now = this.signature();
    if (now === this.seen) return;
    this.seen = now;
    let credentials: ServerCredentials;
    try {
      credentials = readServerCredentials(this.options.files);
    } catch (error) {
      this.options.onError(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.options.onChange(credentials);
  }

  private signature(): string {
    return [this.options.files.certFile, this.options.files.keyFile]
      .map((path) => {
        try {
          const stat = statSync(path);
          return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
        } catch {
          return 'missing';
        }
      })
      .join('|');
  }
}
