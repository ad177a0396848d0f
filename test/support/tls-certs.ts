/**
 * Certificates made with the openssl command for the TLS tests, in a temp dir of their own: a
 * CA, a server certificate for 127.0.0.1 (and `localhost`), a client certificate, and a wrong CA
 * with a server and a client certificate of its own. Each file is PEM; `fingerprint` reads one's
 * SHA-256 the way callgate logs it.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly wrongCaCert: string;
  readonly wrongServerCert: string;
  readonly wrongServerKey: string;
  readonly wrongClientCert: string;
  readonly wrongClientKey: string;
  /** Issues another certificate from the good CA: `name` is its CN and file stem. */
  issue(name: string, san: string): { cert: string; key: string };
  close(): void;
}

const openssl = (dir: string, args: string[]): void => {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
};

const CA_EXTENSIONS = [
  'basicConstraints=critical,CA:TRUE',
  'keyUsage=critical,keyCertSign,cRLSign',
];

/** A self-signed CA `stem` (.pem, .key in `dir`) with subject CN `cn`. */
export function makeCa(dir: string, stem: string, cn: string, extensions = CA_EXTENSIONS): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${stem}.key`,
    '-out',
    `${stem}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${cn}`,
    ...extensions.flatMap((extension) => ['-addext', extension]),
  ]);
}

/**
 * A certificate `stem` (.pem, .key in `dir`) for `subject`, signed by the CA `issuer` (a stem in
 * `dir`), with `extensions` as an openssl extension file's text.
 */
export function signCertificate(
  dir: string,
  issuer: string,
  stem: string,
  subject: string,
  extensions: string,
): void {
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${stem}.key`,
    '-out',
    `${stem}.csr`,
    '-subj',
    subject,
  ]);
  writeFileSync(join(dir, `${stem}.ext`), extensions);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${stem}.csr`,
    '-CA',
    `${issuer}.pem`,
    '-CAkey',
    `${issuer}.key`,
    '-CAcreateserial',
    '-out',
    `${stem}.pem`,
    '-days',
    '2',
    '-extfile',
    `${stem}.ext`,
  ]);
}

function makeLeaf(
  dir: string,
  ca: string,
  stem: string,
  cn: string,
  san: string,
  usage: string,
): void {
  signCertificate(
    dir,
    ca,
    stem,
    `/CN=${cn}`,
    `basicConstraints=CA:FALSE\nsubjectAltName=${san}\nextendedKeyUsage=${usage}\n`,
  );
}

export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-pki-'));
  makeCa(dir, 'ca', 'callgate test CA');
  makeCa(dir, 'wrong-ca', 'someone else');
  makeLeaf(dir, 'ca', 'server', '127.0.0.1', 'IP:127.0.0.1,DNS:localhost', 'serverAuth,clientAuth');
  makeLeaf(
    dir,
    'ca',
    'client',
    'trunk.example',
    'DNS:trunk.example,IP:127.0.0.1',
    'clientAuth,serverAuth',
  );
  makeLeaf(dir, 'wrong-ca', 'wrong-server', '127.0.0.1', 'IP:127.0.0.1', 'serverAuth,clientAuth');
  makeLeaf(dir, 'wrong-ca', 'wrong-client', 'trunk.example', 'DNS:trunk.example', 'clientAuth');
  const at = (file: string): string => join(dir, file);
  return {
    dir,
    caCert: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
    wrongCaCert: at('wrong-ca.pem'),
    wrongServerCert: at('wrong-server.pem'),
    wrongServerKey: at('wrong-server.key'),
    wrongClientCert: at('wrong-client.pem'),
    wrongClientKey: at('wrong-client.key'),
    issue(name, san) {
      makeLeaf(dir, 'ca', name, name, san, 'serverAuth,clientAuth');
      return { cert: at(`${name}.pem`), key: at(`${name}.key`) };
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** SHA-256 of a PEM certificate file, upper-case pairs joined by ':' (as node:crypto gives it). */
export function fingerprint(certFile: string): string {
  return new X509Certificate(readFileSync(certFile)).fingerprint256;
}
