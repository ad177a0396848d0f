/**
 * Trunk security per tenant: a source address allowlist, mutual TLS and/or digest authentication;
 * each one the tenant configures must pass. Pure apart from the clock and the nonce store; the
 * stack turns decisions into 401, 403 or silence.
 */
import { createHash, timingSafeEqual, type X509Certificate } from 'node:crypto';
import { BlockList, isIPv6 } from 'node:net';
import type { TenantConfig } from '../../config/schema.ts';
import { DigestNonceStore } from './digest-nonce-store.ts';
import { headerValue } from './header-names.ts';
import type { SipRequest } from './message-types.ts';
import { peerRefusal, type PeerRefusal, type PeerTrust } from './tls-peer-match.ts';

export type TrunkDecision =
  | { readonly type: 'allow' }
  | {
      readonly type: 'forbidden';
      readonly reason: 'source-not-allowed' | 'bad-credentials' | 'no-password' | PeerRefusal;
    }
  | { readonly type: 'challenge'; readonly header: string };

export interface TrunkGuardOptions {
  readonly nonces?: DigestNonceStore;
  /** Reads a digest password by the name of the variable that holds it. */
  readonly readSecret?: (name: string) => string | undefined;
  /** Each tenant's trust in its trunk's certificate, for tenants with `tls.mutual`. */
  readonly peerTrusts?: ReadonlyMap<string, PeerTrust>;
  /** The clock certificates' validity is judged by. */
  readonly now?: () => Date;
}

export interface DigestCredentials {
  readonly username: string;
  readonly realm: string;
  readonly nonce: string;
  readonly uri: string;
  readonly response: string;
  readonly algorithm?: string;
  readonly qop?: string;
  readonly nc?: string;
  readonly cnonce?: string;
}

export class TrunkGuard {
  private readonly allowLists = new Map<string, BlockList>();
  private readonly nonces: DigestNonceStore;
  private readonly readSecret: (name: string) => string | undefined;
  private readonly peerTrusts: ReadonlyMap<string, PeerTrust>;
  private readonly now: () => Date;

  constructor(tenants: readonly TenantConfig[], options: TrunkGuardOptions = {}) {
    this.nonces = options.nonces ?? new DigestNonceStore();
    this.peerTrusts = options.peerTrusts ?? new Map();
    this.now = options.now ?? (() => new Date());
    this.readSecret = options.readSecret ?? ((name) => process.env[name]);
    for (const tenant of tenants) {
      if (tenant.trunk.allowFrom.length === 0) continue;
      const list = new BlockList();
      for (const entry of tenant.trunk.allowFrom) {
        const [address = '', bits] = entry.split('/');
        const family = isIPv6(address) ? 'ipv6' : 'ipv4';
        list.addSubnet(
          address,
          bits === undefined ? (family === 'ipv6' ? 128 : 32) : Number(bits),
          family,
        );
      }
      this.allowLists.set(tenant.id, list);
    }
  }

  /**
   * `peerCertificates` is the chain the request's TLS connection presented (leaf first, empty
   * when none); undefined when the request did not come over TLS.
   */
  check(
    request: SipRequest,
    sourceAddress: string,
    tenant: TenantConfig,
    peerCertificates?: readonly X509Certificate[],
  ): TrunkDecision {
    const list = this.allowLists.get(tenant.id);
    if (list !== undefined && !list.check(sourceAddress, isIPv6(sourceAddress) ? 'ipv6' : 'ipv4')) {
      return { type: 'forbidden', reason: 'source-not-allowed' };
    }
    if (tenant.tls?.mutual === true) {
      // Refused with 403, not in the handshake: the listener learns the tenant only from the INVITE.
      const trust = this.peerTrusts.get(tenant.id);
      const refusal =
        trust === undefined
          ? 'tls-untrusted'
          : peerRefusal(peerCertificates ?? [], trust, this.now());
      if (refusal !== undefined) return { type: 'forbidden', reason: refusal };
    }
    const digest = tenant.trunk.digest;
    if (digest === undefined) return { type: 'allow' };
    const authorization = headerValue(request.headers, 'Authorization');
    const credentials = authorization === undefined ? undefined : parseDigest(authorization);
    if (credentials === undefined || credentials.realm !== digest.realm)
      return this.challenge(digest.realm, false);
    const nonceState = this.nonces.check(credentials.nonce);
    if (nonceState !== 'valid') return this.challenge(digest.realm, nonceState === 'stale');
    const password = this.readSecret(digest.passwordEnv);
    if (password === undefined || password.length === 0)
      return { type: 'forbidden', reason: 'no-password' };
    if (
      credentials.username !== digest.username ||
      !verifyDigest(credentials, request.method, password)
    ) {
      return { type: 'forbidden', reason: 'bad-credentials' };
    }
    this.nonces.consume(credentials.nonce);
    return { type: 'allow' };
  }

  private challenge(realm: string, stale: boolean): TrunkDecision {
    const nonce = this.nonces.issue();
    return {
      type: 'challenge',
      header: `Digest realm="${realm}", nonce="${nonce}", algorithm=MD5, qop="auth"${stale ? ', stale=true' : ''}`,
    };
  }
}

/** Parses `Digest k=v, k="v"`; undefined when it is not a complete digest response. */
export function parseDigest(header: string): DigestCredentials | undefined {
  const match = /^\s*Digest\s+(.*)$/is.exec(header);
  if (match === null) return undefined;
  const fields = new Map<string, string>();
  const pattern = /([A-Za-z-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))\s*(?:,|$)/g;
  for (const field of (match[1] ?? '').matchAll(pattern)) {
    fields.set((field[1] ?? '').toLowerCase(), field[2] ?? field[3] ?? '');
  }
  const username = fields.get('username');
  const realm = fields.get('realm');
  const nonce = fields.get('nonce');
  const uri = fields.get('uri');
  const response = fields.get('response');
  if (
    username === undefined ||
    realm === undefined ||
    nonce === undefined ||
    uri === undefined ||
    response === undefined
  )
    return undefined;
  const optional = (name: string): Record<string, string> => {
    const value = fields.get(name);
    return value === undefined ? {} : { [name]: value };
  };
  return {
    username,
    realm,
    nonce,
    uri,
    response,
    ...optional('algorithm'),
    ...optional('qop'),
    ...optional('nc'),
    ...optional('cnonce'),
  };
}

const md5 = (text: string): string => createHash('md5').update(text).digest('hex');

/** RFC 2617 section 3.2.2.1, MD5 with or without qop=auth. */
export function digestResponse(
  credentials: Omit<DigestCredentials, 'response'>,
  method: string,
  password: string,
): string {
  const ha1 = md5(`${credentials.username}:${credentials.realm}:${password}`);
  const ha2 = md5(`${method}:${credentials.uri}`);
  if (credentials.qop === 'auth')
    return md5(
      `${ha1}:${credentials.nonce}:${credentials.nc ?? ''}:${credentials.cnonce ?? ''}:auth:${ha2}`,
    );
  return md5(`${ha1}:${credentials.nonce}:${ha2}`);
}

function verifyDigest(credentials: DigestCredentials, method: string, password: string): boolean {
  if (credentials.algorithm !== undefined && credentials.algorithm.toUpperCase() !== 'MD5')
    return false;
  const expected = Buffer.from(digestResponse(credentials, method, password));
  const given = Buffer.from(credentials.response.toLowerCase());
  return expected.length === given.length && timingSafeEqual(expected, given);
}
