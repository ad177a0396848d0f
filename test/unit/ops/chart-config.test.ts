import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../config/load.ts';
import { CHART, readValues } from './chart-files.ts';
import { renderConfig } from './chart-render.ts';

function problemsOf(document: Record<string, unknown>): readonly string[] {
  try {
    parseConfig(document);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

describe('when the ConfigMap is rendered from the default values', () => {
  it('should pass the schema the gateway loads its configuration with', () => {
    expect(problemsOf(renderConfig(readValues()))).toEqual([]);
  });

  it('should listen on every interface, use the built-in driver and point sandbox providers at the sandbox Service', () => {
    const config = parseConfig(renderConfig(readValues()));
    expect([config.sip.listen, config.rtp.listen, config.http.listen]).toEqual([
      '0.0.0.0',
      '0.0.0.0',
      '0.0.0.0',
    ]);
    expect(config.sip.driver).toBe('builtin');
    expect(config.sandbox.enabled).toBe(false);
    expect(config.sandbox.url).toBe('http://callgate-sandbox:8090');
    expect(config.providers.bookings).toMatchObject({
      type: 'sandbox',
      baseUrl: 'http://callgate-sandbox:8090',
    });
  });

  it('should carry the tenants, their actions and policies as the values give them', () => {
    const values = readValues();
    const config = parseConfig(renderConfig(values));
    const tenants = (
      values.config as { tenants: { id: string; actions: Record<string, { policy?: string }> }[] }
    ).tenants;
    expect(config.tenants.map((t) => t.id)).toEqual(tenants.map((t) => t.id));
    for (const tenant of tenants) {
      const rendered = config.tenants.find((t) => t.id === tenant.id);
      for (const [name, action] of Object.entries(tenant.actions)) {
        expect(rendered?.actions[name]?.policy, `${tenant.id}.${name}`).toBe(
          action.policy ?? 'queue',
        );
      }
    }
  });

  it('should keep secrets out of the configuration (only names of variables)', () => {
    const text = JSON.stringify(renderConfig(readValues()));
    expect(text).not.toMatch(/sk-[A-Za-z0-9]/);
    expect(text).not.toMatch(/"(apiKey|password|secret|token)"\s*:/i);
  });

  it('should keep the RTP range the gateway Service lists within the schema rules', () => {
    const config = parseConfig(renderConfig(readValues()));
    expect(config.rtp.portMin % 2).toBe(0);
    expect(config.rtp.portMax - config.rtp.portMin).toBeLessThan(2000);
  });
});

describe('when the drachtio sidecar is enabled', () => {
  it('should select the drachtio driver with the sidecar address and still pass the schema', () => {
    const values = readValues();
    values.drachtio = { ...(values.drachtio as object), enabled: true };
    const config = parseConfig(renderConfig(values));
    expect(config.sip.driver).toBe('drachtio');
    expect(config.sip.drachtio).toMatchObject({
      host: '127.0.0.1',
      port: 9022,
      secretEnv: 'DRACHTIO_SECRET',
    });
  });
});

describe('when the sandbox Deployment is disabled', () => {
  it('should refuse sandbox providers without a baseUrl, as the template fails the install', () => {
    const values = readValues();
    values.sandbox = { ...(values.sandbox as object), enabled: false };
    expect(() => renderConfig(values)).toThrow(
      /config.providers.bookings is a sandbox provider without baseUrl/,
    );
    const helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8');
    expect(helpers).toContain(
      'is a sandbox provider without baseUrl: enable sandbox or give a baseUrl',
    );
  });
});

describe('when a values file breaks a configuration rule', () => {
  it('should be refused by the same schema, with the path of the problem', () => {
    const values = readValues();
    const config = values.config as {
      tenants: { actions: Record<string, Record<string, unknown>> }[];
    };
    const refund = config.tenants[0]?.actions.refund;
    if (refund) refund.policy = 'coalesce';
    expect(problemsOf(renderConfig(values))).toContain(
      'tenants[0].actions.refund.policy: coalesce is only allowed for read actions',
    );
  });
});
