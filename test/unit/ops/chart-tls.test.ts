/**
 * SIP over TLS in the chart (sip.tls), checked where no helm binary runs: the templates are
 * rendered with sip.tls.enabled decided and every other condition kept both ways
 * (chart-template-render.ts), so "enabled renders it" and "disabled renders none of it" are
 * statements about the output; the configuration document through its mirror (chart-render.ts).
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../config/load.ts';
import type { Config } from '../../../config/schema.ts';
import { makeTestPki, type TestPki } from '../../support/tls-certs.ts';
import { readSchema, readTemplates, readValues } from './chart-files.ts';
import { validate } from './json-schema-subset.ts';
import { renderConfig, sipSources, TLS_DIR, TRUNK_CA_DIR } from './chart-render.ts';
import { renderTemplate } from './chart-template-render.ts';

let pki: TestPki;
/** A pod's file system as the chart mounts it: the Secret's and the trunk CA's files. */
let podRoot: string;

beforeAll(() => {
  pki = makeTestPki();
  podRoot = mkdtempSync(join(tmpdir(), 'callgate-chart-tls-'));
  const place = (file: string, at: string) => {
    mkdirSync(dirname(join(podRoot, at)), { recursive: true });
    copyFileSync(file, join(podRoot, at));
  };
  // The keys of a kubernetes.io/tls Secret, and a trunk CA ConfigMap's ca.crt.
  place(pki.serverCert, `${TLS_DIR}/tls.crt`);
  place(pki.serverKey, `${TLS_DIR}/tls.key`);
  place(pki.caCert, `${TLS_DIR}/ca.crt`);
  place(pki.caCert, `${TRUNK_CA_DIR}/carrier/ca.crt`);
});

afterAll(() => {
  pki.close();
  rmSync(podRoot, { recursive: true, force: true });
});

/**
 * Loads a rendered document as the gateway in the pod would, its certificate files read: the
 * mount folders are looked up under podRoot.
 */
function loadInPod(document: Record<string, unknown>): Config {
  const text = JSON.stringify(document).replace(/"\/etc\/callgate-(tls|trunk-ca)\//g, (match) =>
    match.replace('"', `"${podRoot}`),
  );
  return parseConfig(JSON.parse(text));
}

/** What "callgate.sipTlsPort" renders to once included. */
const TLS_PORT = '{{ .Values.config.sip.tlsPort | default 5061 | int }}';
const port = TLS_PORT.replace(/[{}|.$]/g, (c) => `\\${c}`);

/** Anything of SIP over TLS a disabled chart must not render. */
const TLS_TRACES = /sip-tls|callgate-tls|trunk-ca|tlsPort|sip\.tls|"tls"/;

const templates = new Map(readTemplates().map((file) => [file.name, file.text]));
const helpers = templates.get('_helpers.tpl') ?? '';

function rendered(name: string, tlsEnabled: boolean): string {
  return renderTemplate(templates.get(name) ?? '', helpers, {
    tlsEnabled,
    opaque: ['callgate.config'],
  });
}

interface TlsValues {
  enabled: boolean;
  secretName: string;
  useSecretCa: boolean;
  trunkCAs: { name: string; secretName?: string; configMapName?: string; key?: string }[];
}

/** The default values with sip.tls changed as given. */
function withTls(tls: Partial<TlsValues>): Record<string, unknown> {
  const values = readValues();
  const sip = values.sip as { tls: TlsValues };
  sip.tls = { ...sip.tls, enabled: true, secretName: 'callgate-tls', ...tls };
  return values;
}

interface TenantValues {
  id: string;
  numbers?: string[];
  agent?: string;
  trunk?: Record<string, unknown>;
  tls?: Record<string, unknown>;
}

function tenants(values: Record<string, unknown>): TenantValues[] {
  return (values.config as { tenants: TenantValues[] }).tenants;
}

describe('when sip.tls is left at its default', () => {
  it('should be off, with the port at 5061 for when it is enabled', () => {
    const values = readValues();
    expect((values.sip as { tls: TlsValues }).tls).toEqual({
      enabled: false,
      secretName: '',
      useSecretCa: false,
      trunkCAs: [],
    });
    expect((values.config as { sip: { tlsPort: number } }).sip.tlsPort).toBe(5061);
  });

  it.each(['gateway-deployment.yaml', 'gateway-service.yaml', 'networkpolicy.yaml'])(
    'should render no TLS port, mount or volume in %s',
    (name) => {
      const text = rendered(name, false);
      expect(text).toContain('config.sip.tcpPort');
      expect(text).not.toMatch(TLS_TRACES);
    },
  );

  it('should render a configuration without a TLS listener', () => {
    const config = parseConfig(renderConfig(readValues()));
    expect(config.sip.transports).toEqual(['udp', 'tcp']);
    expect(config.sip.tls).toBeUndefined();
  });
});

describe('when sip.tls is enabled', () => {
  it('should expose 5061/TCP as sip-tls on the gateway container', () => {
    expect(rendered('gateway-deployment.yaml', true)).toMatch(
      new RegExp(`- name: sip-tls\\s+containerPort: ${port}\\s+protocol: TCP`),
    );
  });

  it('should mount the whole Secret read-only, never by subPath, where the config points', () => {
    const text = rendered('gateway-deployment.yaml', true);
    expect(text).toMatch(new RegExp(`- name: sip-tls\\s+mountPath: ${TLS_DIR}\\s+readOnly: true`));
    expect(text).toMatch(
      /- name: sip-tls\s+secret:\s+secretName: \{\{ \$tls\.secretName \}\}\s+(?:#.*\s+)?defaultMode: 0440/,
    );
    // A subPath mount is never updated by kubelet: a renewed certificate would not arrive.
    expect(text).not.toMatch(/subPath/);
    const sip = renderConfig(withTls({})).sip as { tls: Record<string, unknown> };
    expect(sip.tls).toEqual({ certFile: `${TLS_DIR}/tls.crt`, keyFile: `${TLS_DIR}/tls.key` });
    expect(helpers).toContain(`{{- define "callgate.tlsDir" -}}${TLS_DIR}{{- end -}}`);
    expect(helpers).toContain('{{- $_ := set $files "certFile" (printf "%s/tls.crt" $dir) -}}');
    expect(helpers).toContain('{{- $_ := set $files "keyFile" (printf "%s/tls.key" $dir) -}}');
  });

  it('should not roll the pods when the certificate changes: the config names files only', () => {
    const text = rendered('gateway-deployment.yaml', true);
    expect([...text.matchAll(/checksum\/(\S+):/g)].map((m) => m[1])).toEqual(['config']);
    const document = JSON.stringify(renderConfig(withTls({ useSecretCa: true })));
    expect(document).not.toMatch(/BEGIN|tls\.crt":|secretName/);
  });

  it('should list the port on the service-mode Service', () => {
    expect(rendered('gateway-service.yaml', true)).toMatch(
      new RegExp(`- name: sip-tls\\s+port: ${port}\\s+targetPort: ${port}\\s+protocol: TCP`),
    );
  });

  it('should let the port in from the same sources as SIP', () => {
    // The TLS port is one more port of the SIP rule, so its `from` is the SIP sources.
    expect(rendered('networkpolicy.yaml', true)).toMatch(
      new RegExp(
        `- port: \\{\\{ \\$\\.Values\\.config\\.sip\\.tcpPort \\}\\}\\s+protocol: TCP\\s+- port: ${port}\\s+protocol: TCP\\s+from:\\s+- ipBlock:\\s+cidr: \\{\\{ \\. \\}\\}`,
      ),
    );
    expect(sipSources(withTls({}))).toEqual(['192.0.2.0/24']);
  });

  it('should add tls to the transports and pass the schema the gateway loads', () => {
    const config = loadInPod(renderConfig(withTls({})));
    expect(config.sip.transports).toEqual(['udp', 'tcp', 'tls']);
    expect(config.sip.tlsPort).toBe(5061);
    expect(config.sip.tls).toMatchObject({
      certFile: `${podRoot}${TLS_DIR}/tls.crt`,
      keyFile: `${podRoot}${TLS_DIR}/tls.key`,
      reloadIntervalMs: 10_000,
    });
    expect(config.sip.tls?.caFile).toBeUndefined();
  });

  it("should keep the TLS limits config.sip.tls sets, and take the Secret's ca.crt when asked", () => {
    const values = withTls({ useSecretCa: true });
    const sip = (values.config as { sip: Record<string, unknown> }).sip;
    sip.tls = { handshakeTimeoutMs: 2000, certFile: '/elsewhere.pem' };
    const config = loadInPod(renderConfig(values));
    expect(config.sip.tls).toMatchObject({
      certFile: `${podRoot}${TLS_DIR}/tls.crt`,
      caFile: `${podRoot}${TLS_DIR}/ca.crt`,
      handshakeTimeoutMs: 2000,
    });
    expect(helpers).toContain('{{- $_ := set $files "caFile" (printf "%s/ca.crt" $dir) -}}');
  });
});

describe('when a tenant verifies its trunk by a CA the chart mounts', () => {
  const secure = (): Record<string, unknown> => {
    const values = withTls({ trunkCAs: [{ name: 'carrier', configMapName: 'carrier-ca' }] });
    tenants(values).push({
      id: 'secure',
      numbers: ['2000'],
      agent: 'concierge',
      trunk: {},
      tls: {
        caFile: `${TRUNK_CA_DIR}/carrier/ca.crt`,
        name: 'sbc.carrier.example',
        mutual: true,
      },
    });
    return values;
  };

  it('should mount each trunk CA read-only from its Secret or ConfigMap', () => {
    const text = rendered('gateway-deployment.yaml', true);
    expect(text).toMatch(
      new RegExp(
        `- name: trunk-ca-\\{\\{ \\.name \\}\\}\\s+mountPath: ${TRUNK_CA_DIR}/\\{\\{ \\.name \\}\\}\\s+readOnly: true`,
      ),
    );
    expect(text).toMatch(
      /- name: trunk-ca-\{\{ \.name \}\}\s+secret:\s+secretName: \{\{ \.secretName \}\}\s+configMap:\s+name: \{\{ required .* \.configMapName \}\}/,
    );
  });

  it('should render a mutual TLS tenant the schema accepts, with SIP open to any source', () => {
    const values = secure();
    const config = loadInPod(renderConfig(values));
    expect(config.tenants.find((t) => t.id === 'secure')?.tls).toEqual({
      caFile: `${podRoot}${TRUNK_CA_DIR}/carrier/ca.crt`,
      name: 'sbc.carrier.example',
      mutual: true,
    });
    // Its client certificate is the check, so the NetworkPolicy cannot narrow the sources.
    expect(sipSources(values)).toBe('any');
  });

  it('should refuse a tenant CA under the mount folder that no trunkCAs entry mounts', () => {
    const values = secure();
    (values.sip as { tls: TlsValues }).tls.trunkCAs = [{ name: 'other', secretName: 'other-ca' }];
    expect(() => renderConfig(values)).toThrow(
      `config.tenants[1].tls.caFile (${TRUNK_CA_DIR}/carrier/ca.crt) is not a CA sip.tls.trunkCAs mounts`,
    );
    expect(helpers).toContain('is not a CA sip.tls.trunkCAs mounts: add {');
  });
});

describe('when sip.tls cannot work as configured', () => {
  it.each([
    [
      'tls listed in config.sip.transports without sip.tls.enabled',
      (values: Record<string, unknown>) => {
        (values.config as { sip: { transports: string[] } }).sip.transports = ['udp', 'tls'];
      },
      'config.sip.transports lists tls: set sip.tls.enabled and sip.tls.secretName',
    ],
    [
      'sip.tls.enabled without a Secret',
      (values: Record<string, unknown>) => {
        (values.sip as { tls: TlsValues }).tls = { ...withTlsOf(values), secretName: '' };
      },
      'sip.tls.enabled needs sip.tls.secretName: a kubernetes.io/tls Secret',
    ],
    [
      'sip.tls.enabled with the drachtio sidecar',
      (values: Record<string, unknown>) => {
        (values.sip as { tls: TlsValues }).tls = withTlsOf(values);
        values.drachtio = { ...(values.drachtio as object), enabled: true };
      },
      'sip.tls.enabled needs the built-in SIP stack',
    ],
  ])('should fail the install for %s', (_case, change, message) => {
    const values = readValues();
    change(values);
    expect(() => renderConfig(values)).toThrow(message);
    expect(helpers).toContain(message);
  });

  it.each([
    [
      'a trunk CA name that is no DNS label',
      { trunkCAs: [{ name: 'Carrier_A', secretName: 'x' }] },
      '$.sip.tls.trunkCAs[0].name: must match ^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$',
    ],
    ['an unknown sip.tls key', { secret: 'x' }, '$.sip.tls.secret: unknown key'],
  ])('should refuse %s in values.schema.json', (_case, tls, problem) => {
    const values = readValues();
    const sip = values.sip as { tls: Record<string, unknown> };
    sip.tls = { ...sip.tls, ...tls };
    expect(validate(readSchema(), values)).toContain(problem);
  });
});

function withTlsOf(values: Record<string, unknown>): TlsValues {
  return { ...(values.sip as { tls: TlsValues }).tls, enabled: true, secretName: 'callgate-tls' };
}
