/**
 * The chart's security settings, checked on its templates and values (no helm binary runs here):
 * the operator API on its own ClusterIP port, a NetworkPolicy on by default, non-root pods with a
 * read-only root filesystem, no capabilities and RuntimeDefault seccomp, tokens from the Secret,
 * and a closed example tenant.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../config/load.ts';
import { CHART, ROOT, readTemplates, readValues } from './chart-files.ts';
import { renderConfig, sipSources, tokenEnv } from './chart-render.ts';

const template = (name: string): string => readFileSync(join(CHART, 'templates', name), 'utf8');

interface Values {
  operator: { port: number };
  operatorTokens: Record<string, unknown>[];
  networkPolicy: {
    enabled: boolean;
    operatorFrom: unknown[];
    prometheus: { namespaceSelector: unknown; podSelector: unknown };
    extraSipFrom: string[];
    rtpFrom: string[];
  };
  podSecurityContext: Record<string, unknown>;
  securityContext: Record<string, unknown>;
  gateway: { sysNice: boolean; service: { type: string } };
  config: {
    http: { port: number };
    tenants: { id: string; trunk?: Record<string, unknown> }[];
  };
}

const values = (): Values => readValues() as unknown as Values;

/** The Services the chart renders, by template: their type and port names. */
function servicePorts(text: string): { types: string[]; ports: string[] } {
  return {
    types: [...text.matchAll(/^\s*type: (\S+)/gm)].map((m) => m[1] ?? ''),
    ports: [...text.matchAll(/^\s*- name: (\S+)/gm)].map((m) => m[1] ?? ''),
  };
}

describe('when the operator API is rendered', () => {
  it('should have its own ClusterIP Service on port 8081 named operator', () => {
    expect(values().operator.port).toBe(8081);
    const text = template('operator-service.yaml');
    expect(servicePorts(text)).toEqual({ types: ['ClusterIP'], ports: ['operator'] });
    expect(text).toContain('port: {{ .Values.operator.port }}');
    expect(text).toContain('targetPort: operator');
  });

  it('should keep probes and metrics alone on 8080, named http', () => {
    expect(values().config.http.port).toBe(8080);
    expect(servicePorts(template('http-service.yaml'))).toEqual({
      types: ['ClusterIP'],
      ports: ['http'],
    });
  });

  it('should never put the operator port in a LoadBalancer or NodePort Service', () => {
    const exposed = readTemplates().filter(
      (file) =>
        /kind: Service\b/.test(file.text) &&
        file.name !== 'operator-service.yaml' &&
        /operator/.test(file.text.replace(/^\s*#.*$/gm, '')),
    );
    expect(exposed.map((file) => file.name)).toEqual([]);
    expect(template('gateway-service.yaml')).not.toMatch(/8081|operator/);
  });

  it('should name the operator port on every pod that serves it', () => {
    for (const name of ['gateway-deployment.yaml', 'worker-deployment.yaml'])
      expect(template(name), name).toMatch(
        /- name: operator\n\s+containerPort: \{\{ \.Values\.operator\.port \}\}/,
      );
  });
});

describe('when operator tokens are configured', () => {
  const withTokens = (): Record<string, unknown> => {
    const v = readValues();
    v.operatorTokens = [
      { name: 'on-call', scopes: ['operations:read', 'calls:read'], value: 'x' },
      { name: 'admin', scopes: ['admin'], existingSecret: 'ops-tokens', key: 'admin' },
    ];
    return v;
  };

  it('should listen on the pod address with each token read from CALLGATE_TOKEN_<NAME>', () => {
    const http = renderConfig(withTokens()).http as { operator: unknown };
    expect(http.operator).toEqual({
      listen: '0.0.0.0',
      port: 8081,
      tokens: [
        {
          name: 'on-call',
          tokenEnv: 'CALLGATE_TOKEN_ON_CALL',
          scopes: ['operations:read', 'calls:read'],
        },
        { name: 'admin', tokenEnv: 'CALLGATE_TOKEN_ADMIN', scopes: ['admin'] },
      ],
    });
    expect(tokenEnv('on-call')).toBe('CALLGATE_TOKEN_ON_CALL');
    // The rendered document, operator listener and tokens included, passes the schema.
    expect(() => parseConfig(renderConfig(withTokens()))).not.toThrow();
  });

  it('should keep a value token in the chart Secret and read an existing one by its key', () => {
    const helpers = template('_helpers.tpl');
    expect(helpers).toContain('printf "CALLGATE_TOKEN_%s" (. | upper | replace "-" "_")');
    expect(helpers).toMatch(
      /- name: \{\{ include "callgate\.tokenEnv" \$token\.name \}\}\n\s+valueFrom:\n\s+secretKeyRef:\n\s+name: \{\{ \$token\.existingSecret \}\}/,
    );
    expect(template('secret.yaml')).toContain(
      '{{ include "callgate.tokenEnv" .name }}: {{ .value | quote }}',
    );
    for (const name of ['gateway-deployment.yaml', 'worker-deployment.yaml'])
      expect(template(name), name).toContain(
        '{{- include "callgate.operatorTokenEnv" . | nindent 12 }}',
      );
  });

  it('should listen on the pod loopback only when there is no token', () => {
    const http = renderConfig(readValues()).http as { operator: unknown };
    expect(values().operatorTokens).toEqual([]);
    expect(http.operator).toEqual({ listen: '127.0.0.1', port: 8081 });
  });
});

describe('when the NetworkPolicy is rendered', () => {
  it('should be on by default, for gateway and worker pods', () => {
    expect(values().networkPolicy.enabled).toBe(true);
    const text = template('networkpolicy.yaml');
    expect(text).toMatch(/^\{\{- if \.Values\.networkPolicy\.enabled \}\}/);
    expect(text).toContain('range $component := list "gateway" "worker"');
    expect(text).toContain('policyTypes: [Ingress]');
  });

  it('should let only operatorFrom reach the operator port, and only Prometheus reach metrics', () => {
    const text = template('networkpolicy.yaml');
    expect(text).toMatch(
      /\{\{- with \$np\.operatorFrom \}\}\n\s+- ports:\n\s+- port: operator\n\s+protocol: TCP\n\s+from:/,
    );
    expect(text).toMatch(
      /- port: http\n\s+protocol: TCP\n\s+from:\n\s+- namespaceSelector:\n\s+\{\{- toYaml \$np\.prometheus\.namespaceSelector/,
    );
    expect(values().networkPolicy.prometheus).toEqual({
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    });
  });

  it('should let SIP and RTP in from the tenants’ trunk sources', () => {
    expect(sipSources(readValues())).toEqual(['192.0.2.0/24']);
    const v = readValues();
    (v.networkPolicy as Values['networkPolicy']).extraSipFrom = ['198.51.100.7'];
    expect(sipSources(v)).toEqual(['192.0.2.0/24', '198.51.100.7/32']);
    const text = template('networkpolicy.yaml');
    expect(text).toContain('{{- $sip := include "callgate.sipSources" . -}}');
    expect(text).toMatch(/endPort: \{\{ \$\.Values\.config\.rtp\.portMax \}\}/);
  });

  it('should let SIP in from anywhere only when a tenant lets anyone call', () => {
    const v = readValues();
    const tenants = (v.config as Values['config']).tenants;
    tenants.push({ id: 'lobby', trunk: { open: true } });
    expect(sipSources(v)).toBe('any');
  });
});

describe('when pods are rendered', () => {
  const pods = ['gateway-deployment.yaml', 'worker-deployment.yaml', 'sandbox.yaml'];

  it('should run as a fixed non-root user with the RuntimeDefault seccomp profile', () => {
    expect(values().podSecurityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    for (const name of pods)
      expect(template(name), name).toMatch(
        /securityContext:\n\s+\{\{- include "callgate\.podSecurityContext" \. \| nindent 8 \}\}/,
      );
  });

  it('should give every container a read-only root, no capabilities and no escalation', () => {
    expect(values().securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    for (const name of pods) {
      const text = template(name);
      const containers = (text.match(/^\s+- name: \S+\n(?:\s+#.*\n)*\s+image:/gm) ?? []).length;
      const contexts = (text.match(/include "callgate\.securityContext"/g) ?? []).length;
      expect(contexts, name).toBe(containers);
    }
  });

  it('should mount an emptyDir on /tmp for what must be written', () => {
    for (const name of pods) {
      const text = template(name);
      expect(text, name).toMatch(/- name: tmp\n\s+emptyDir: \{\}/);
      expect(text, name).toMatch(/- name: tmp\n\s+mountPath: \/tmp/);
    }
  });

  it('should keep the media-test recordings and temporary files under /tmp', () => {
    const config = parseConfig(renderConfig(readValues()));
    for (const tenant of config.tenants)
      if (tenant.mediaTest) expect(tenant.mediaTest.recordDir.startsWith('/tmp')).toBe(true);
  });
});

describe('when the gateway needs a negative nice', () => {
  it('should need gateway.sysNice, an explicit opt-in off by default', () => {
    expect(values().gateway.sysNice).toBe(false);
    expect(template('gateway-deployment.yaml')).toContain(
      'fail "config.gateway.nice below 0 needs CAP_SYS_NICE: set gateway.sysNice',
    );
  });

  it('should then add SYS_NICE alone, as uid 0', () => {
    const helpers = template('_helpers.tpl');
    expect(helpers).toMatch(
      /\{\{- if \.sysNice -\}\}\n.*"runAsNonRoot" false.*\n.*"runAsUser" 0.*\n.*\(dict "drop" \(list "ALL"\) "add" \(list "SYS_NICE"\)\)/,
    );
    expect(template('gateway-deployment.yaml')).toContain(
      'include "callgate.securityContext" (dict "root" . "sysNice" $g.sysNice)',
    );
  });
});

describe('when the chart’s example tenant is rendered', () => {
  it('should be closed: a documented example CIDR, not open', () => {
    const config = parseConfig(renderConfig(readValues()));
    expect(config.tenants.map((t) => [t.id, t.trunk.open, t.trunk.allowFrom])).toEqual([
      ['demo', false, ['192.0.2.0/24']],
    ]);
  });
});

describe('when the image is built', () => {
  it('should run as a numeric non-root user, the one the chart runs pods as', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const users = [...dockerfile.matchAll(/^USER (\S+)$/gm)].map((m) => m[1]);
    const { runAsUser, runAsGroup } = values().podSecurityContext;
    expect(users).toEqual([`${Number(runAsUser)}:${Number(runAsGroup)}`]);
  });
});
