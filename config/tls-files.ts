/**
 * The PEM files SIP over TLS names (sip.tls and tenants[].tls), checked at load: a file that
 * cannot be read, or holds no PEM block of the kind expected, is a configuration problem listed
 * with the others, not a listener that fails later (test/unit/config/tls-config.test.ts).
 * Relative paths are made absolute against the configuration file's folder.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from './schema.ts';

type PemKind = 'certificate' | 'private key';

const PEM_MARKERS: Record<PemKind, RegExp> = {
  certificate: /-----BEGIN CERTIFICATE-----/,
  'private key': /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/,
};

/** Resolves every TLS file path in place and returns the problems of those it cannot use. */
export function checkTlsFiles(config: Config, baseDir: string): string[] {
  const problems: string[] = [];
  const check = (at: string, path: string, kind: PemKind): string => {
    const absolute = resolve(baseDir, path);
    const problem = pemFileProblem(absolute, kind);
    if (problem !== undefined) problems.push(`${at}: ${problem}`);
    return absolute;
  };
  const tls = config.sip.tls;
  if (tls !== undefined && config.sip.transports.includes('tls')) {
    tls.certFile = check('sip.tls.certFile', tls.certFile, 'certificate');
    tls.keyFile = check('sip.tls.keyFile', tls.keyFile, 'private key');
    if (tls.caFile !== undefined) tls.caFile = check('sip.tls.caFile', tls.caFile, 'certificate');
  }
  config.tenants.forEach((tenant, i) => {
    if (tenant.tls !== undefined)
      tenant.tls.caFile = check(`tenants[${i}].tls.caFile`, tenant.tls.caFile, 'certificate');
  });
  return problems;
}

/** Why `path` is no PEM file of `kind`; undefined when it is one. */
export function pemFileProblem(path: string, kind: PemKind): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`;
  }
  return PEM_MARKERS[kind].test(text) ? undefined : `${path} holds no PEM ${kind}`;
}
