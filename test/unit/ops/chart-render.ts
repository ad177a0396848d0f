/**
 * What the chart's templates compute from values, mirrored for the tests where no helm binary runs:
 * the ConfigMap's configuration document and the NetworkPolicy's SIP sources.
 */

/** CALLGATE_TOKEN_<NAME>, as templates/_helpers.tpl ("callgate.tokenEnv") names a token's variable. */
export function tokenEnv(name: string): string {
  return `CALLGATE_TOKEN_${name.toUpperCase().replace(/-/g, '_')}`;
}

/**
 * The configuration document templates/_helpers.tpl ("callgate.config") renders into the ConfigMap:
 * .Values.config with sip.driver following drachtio.enabled, sip over TLS from sip.tls
 * ({@link withSipTls}), the embedded sandbox off, sandbox.url
 * and sandbox providers without a baseUrl pointed at the sandbox Deployment, and http.operator
 * from operator and operatorTokens. Keep the two in step.
 */
export function renderConfig(
  values: Record<string, unknown>,
  fullname = 'callgate',
): Record<string, unknown> {
  const config = structuredClone(values.config) as Record<string, unknown>;
  const drachtio = values.drachtio as { enabled: boolean; adminPort: number };
  const sandbox = values.sandbox as { enabled: boolean; port: number };
  const sip = (config.sip ?? {}) as Record<string, unknown>;
  if (drachtio.enabled) {
    sip.driver = 'drachtio';
    sip.drachtio = { host: '127.0.0.1', port: drachtio.adminPort, secretEnv: 'DRACHTIO_SECRET' };
  } else {
    sip.driver = 'builtin';
  }
  withSipTls(values, sip);
  config.sip = sip;
  config.sandbox = {
    ...((config.sandbox ?? {}) as Record<string, unknown>),
    enabled: false,
    ...(sandbox.enabled && { url: `http://${fullname}-sandbox:${sandbox.port}` }),
  };
  for (const [name, provider] of Object.entries(
    (config.providers ?? {}) as Record<string, Record<string, unknown>>,
  )) {
    if (provider.type === 'sandbox' && !provider.baseUrl) {
      if (!sandbox.enabled)
        throw new Error(
          `config.providers.${name} is a sandbox provider without baseUrl: enable sandbox or give a baseUrl`,
        );
      provider.baseUrl = `http://${fullname}-sandbox:${sandbox.port}`;
    }
  }
  const tokens = (values.operatorTokens as { name: string; scopes: string[] }[]).map((token) => ({
    name: token.name,
    tokenEnv: tokenEnv(token.name),
    scopes: token.scopes,
  }));
  config.http = {
    ...((config.http ?? {}) as Record<string, unknown>),
    operator: {
      listen: tokens.length > 0 ? '0.0.0.0' : '127.0.0.1',
      port: (values.operator as { port: number }).port,
      ...(tokens.length > 0 && { tokens }),
    },
  };
  return config;
}

/**
 * The SIP sources the NetworkPolicy admits ("callgate.sipSources"): every tenant's allowFrom as
 * CIDRs and networkPolicy.extraSipFrom, or `any` when a tenant lets anyone call (open, digest only).
 */
export function sipSources(values: Record<string, unknown>): string[] | 'any' {
  const tenants = (values.config as { tenants: { trunk?: { allowFrom?: string[] } }[] }).tenants;
  if (tenants.some((tenant) => (tenant.trunk?.allowFrom ?? []).length === 0)) return 'any';
  const extra = (values.networkPolicy as { extraSipFrom: string[] }).extraSipFrom;
  const all = [...tenants.flatMap((tenant) => tenant.trunk?.allowFrom ?? []), ...extra].map(asCidr);
  return [...new Set(all)];
}

/** A bare address is one host ("callgate.cidr"). */
function asCidr(entry: string): string {
  if (entry.includes('/')) return entry;
  return entry.includes(':') ? `${entry}/128` : `${entry}/32`;
}

/** Where the certificate Secret and the trunk CAs are mounted ("callgate.tlsDir", "callgate.trunkCaDir"). */
export const TLS_DIR = '/etc/callgate-tls';
export const TRUNK_CA_DIR = '/etc/callgate-trunk-ca';

interface SipTlsValues {
  readonly enabled: boolean;
  readonly secretName: string;
  readonly useSecretCa: boolean;
  readonly trunkCAs: readonly {
    name: string;
    secretName?: string;
    configMapName?: string;
    key?: string;
  }[];
}

/**
 * config.sip with sip.tls ("callgate.sipTlsConfig"): tls added to transports, certFile and keyFile
 * (caFile with useSecretCa) naming the mounted Secret's files over the rest of config.sip.tls, and
 * every tenant CA under TRUNK_CA_DIR mounted by trunkCAs. Without it, listing tls fails.
 */
function withSipTls(values: Record<string, unknown>, sip: Record<string, unknown>): void {
  const tls = (values.sip as { tls: SipTlsValues }).tls;
  const transports = (sip.transports ?? ['udp', 'tcp']) as string[];
  if (!tls.enabled) {
    if (transports.includes('tls'))
      throw new Error(
        'config.sip.transports lists tls: set sip.tls.enabled and sip.tls.secretName (the certificate Secret the chart mounts)',
      );
    return;
  }
  if ((values.drachtio as { enabled: boolean }).enabled)
    throw new Error(
      "sip.tls.enabled needs the built-in SIP stack: with drachtio.enabled, drachtio-server owns SIP and callgate's TLS listener does not run",
    );
  if (!tls.secretName)
    throw new Error(
      'sip.tls.enabled needs sip.tls.secretName: a kubernetes.io/tls Secret with tls.crt and tls.key',
    );
  sip.transports = transports.includes('tls') ? transports : [...transports, 'tls'];
  sip.tls = {
    ...((sip.tls ?? {}) as Record<string, unknown>),
    certFile: `${TLS_DIR}/tls.crt`,
    keyFile: `${TLS_DIR}/tls.key`,
    ...(tls.useSecretCa && { caFile: `${TLS_DIR}/ca.crt` }),
  };
  const mounted = tls.trunkCAs.map((ca) => `${TRUNK_CA_DIR}/${ca.name}/${ca.key ?? 'ca.crt'}`);
  const tenants = (values.config as { tenants: { tls?: { caFile?: string } }[] }).tenants;
  tenants.forEach((tenant, i) => {
    const caFile = tenant.tls?.caFile ?? '';
    if (caFile.startsWith(`${TRUNK_CA_DIR}/`) && !mounted.includes(caFile))
      throw new Error(
        `config.tenants[${i}].tls.caFile (${caFile}) is not a CA sip.tls.trunkCAs mounts: add { name, secretName or configMapName, key } there`,
      );
  });
}
