/**
 * Who checks the TLS files at load: a gateway reads the listener's certificate and key and the
 * trunks' CAs, so a missing one stops it with the path named; a worker opens no TLS and loads the
 * same configuration without them (its pod mounts none of them: helm/callgate/README.md).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, EXAMPLE_CONFIG_PATH, loadConfig } from '../../../config/load.ts';
import { parse } from 'yaml';
import { readFileSync } from 'node:fs';

function withTls(): unknown {
  const document = parse(readFileSync(EXAMPLE_CONFIG_PATH, 'utf8')) as {
    sip: Record<string, unknown>;
  };
  document.sip.transports = ['udp', 'tcp', 'tls'];
  document.sip.tls = { certFile: '/nonexistent/tls.crt', keyFile: '/nonexistent/tls.key' };
  return document;
}

describe('when the configuration names TLS files that are not there', () => {
  it('should stop a gateway naming each missing file', () => {
    let problems: readonly string[] = [];
    try {
      loadConfig({ document: withTls(), env: {} });
    } catch (error) {
      if (error instanceof ConfigError) problems = error.problems;
    }
    expect(problems).toEqual([
      expect.stringMatching(/^sip\.tls\.certFile: cannot read \/nonexistent\/tls\.crt/),
      expect.stringMatching(/^sip\.tls\.keyFile: cannot read \/nonexistent\/tls\.key/),
    ]);
  });

  it('should load for a worker, which opens no TLS, leaving the paths as written', () => {
    const config = loadConfig({ document: withTls(), env: {}, tlsFiles: false });
    expect(config.sip.transports).toContain('tls');
    expect(config.sip.tls?.keyFile).toBe('/nonexistent/tls.key');
  });
});
