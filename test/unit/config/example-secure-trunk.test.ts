/**
 * The secure trunk example in config/callgate.example.yaml is comments (the embedded default has
 * no certificate), so nothing else would notice it going stale: its two snippets are taken out,
 * put where they say (`sip`, and the demo tenant in place of its srtp, codecs and media) and the
 * result loaded with certificate files at the example's relative paths.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { EXAMPLE_CONFIG_PATH, loadConfig } from '../../../config/load.ts';
import { makeTestPki, type TestPki } from '../../support/tls-certs.ts';

const example = readFileSync(EXAMPLE_CONFIG_PATH, 'utf8');

/** The indented snippets of the comment block that opens with `# A secure trunk`, in order. */
function secureTrunkSnippets(): Record<string, unknown>[] {
  const lines = example.split('\n');
  const start = lines.findIndex((line) => line.startsWith('# A secure trunk'));
  const snippets: string[][] = [];
  let current: string[] | undefined;
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith('#')) break;
    if (line.startsWith('#   ')) {
      current ??= [];
      current.push(line.slice(4));
    } else if (current !== undefined) {
      snippets.push(current);
      current = undefined;
    }
  }
  if (current !== undefined) snippets.push(current);
  return snippets.map((snippet) => parseYaml(snippet.join('\n')) as Record<string, unknown>);
}

let pki: TestPki;
let configDir: string;

beforeAll(() => {
  pki = makeTestPki();
  configDir = mkdtempSync(join(tmpdir(), 'callgate-example-tls-'));
  mkdirSync(join(configDir, 'tls'));
  copyFileSync(pki.serverCert, join(configDir, 'tls/callgate.crt'));
  copyFileSync(pki.serverKey, join(configDir, 'tls/callgate.key'));
  copyFileSync(pki.caCert, join(configDir, 'tls/trunk-ca.pem'));
});

afterAll(() => {
  pki.close();
  rmSync(configDir, { recursive: true, force: true });
});

describe('when the secure trunk example is put into the example configuration', () => {
  it('should load, with the TLS listener and the tenant secured as its comments say', () => {
    const snippets = secureTrunkSnippets();
    expect(snippets).toHaveLength(2);
    const [sip, tenant] = snippets as [Record<string, unknown>, Record<string, unknown>];
    const document = parseYaml(example) as {
      sip: Record<string, unknown>;
      tenants: Record<string, unknown>[];
    };
    Object.assign(document.sip, sip);
    Object.assign(document.tenants[0] ?? {}, tenant);

    const config = loadConfig({ document, env: {}, baseDir: configDir });
    expect(config.sip.transports).toEqual(['udp', 'tcp', 'tls']);
    expect(config.sip.tlsPort).toBe(5061);
    expect(config.sip.tls).toMatchObject({
      certFile: join(configDir, 'tls/callgate.crt'),
      keyFile: join(configDir, 'tls/callgate.key'),
      reloadIntervalMs: 10_000,
    });
    const demo = config.tenants[0];
    expect(demo?.tls).toEqual({
      caFile: join(configDir, 'tls/trunk-ca.pem'),
      name: 'sbc.trunk.example',
      mutual: true,
    });
    expect(demo?.srtp).toBe('required');
    expect(demo?.codecs[0]).toBe('G722');
    expect(demo?.media.allowFrom).toEqual(['203.0.113.0/24']);
  });

  it('should name the address a PBX dials over TLS', () => {
    expect(example).toContain('sip:1000@<host>:5061;transport=tls');
  });
});
