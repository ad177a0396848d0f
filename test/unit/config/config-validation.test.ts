import { describe, expect, it } from 'vitest';
import { ConfigError, EXAMPLE_CONFIG_PATH, loadConfig, parseConfig } from '../../../config/load.ts';

/** A minimal valid document that each case breaks in one place. */
function base(): Record<string, unknown> {
  return {
    providers: { bookings: { type: 'sandbox', service: 'bookings' } },
    tenants: [
      {
        id: 'demo',
        numbers: ['1000'],
        agent: 'concierge',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: { book_table: { kind: 'mutation', provider: 'bookings' } },
      },
    ],
  };
}

function problemsOf(document: unknown, env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    loadConfig({ document, env });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

function tenant(document: Record<string, unknown>, index = 0): Record<string, unknown> {
  return (document.tenants as Record<string, unknown>[])[index] as Record<string, unknown>;
}

describe('when the configuration is the bundled example', () => {
  it('should load as the embedded default with the demo tenant owning 1000 on loopback defaults', () => {
    const config = loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} });
    expect(config.tenants.map((t) => t.numbers)).toEqual([['1000']]);
    expect(config.sip).toMatchObject({
      listen: '127.0.0.1',
      udpPort: 5060,
      tcpPort: 5060,
      transports: ['udp', 'tcp'],
    });
    expect(config.rtp).toMatchObject({ listen: '127.0.0.1', portMin: 20000, portMax: 29999 });
    expect(config.http).toEqual({
      listen: '127.0.0.1',
      port: 8080,
      operator: { listen: '127.0.0.1', port: 8081, tokens: [] },
    });
    expect(config.redis.url).toBeUndefined();
  });

  it('should apply defaults to an empty document', () => {
    const config = parseConfig({});
    expect(config.http.port).toBe(8080);
    expect(config.tenants).toEqual([]);
    expect(config.ledger.retentionDays).toBeGreaterThanOrEqual(7);
  });
});

describe('when a configuration breaks a rule', () => {
  const cases: [string, (d: Record<string, unknown>) => void, string][] = [
    ['an unknown top-level key', (d) => (d.sipp = {}), 'sipp: unknown key'],
    ['an unknown nested key', (d) => (tenant(d).agnet = 'x'), 'tenants[0].agnet: unknown key'],
    ['a port out of range', (d) => (d.http = { port: 70000 }), 'http.port:'],
    ['a port of the wrong type', (d) => (d.sip = { udpPort: 'five' }), 'sip.udpPort:'],
    [
      'a nice value the kernel has no such priority for',
      (d) => (d.gateway = { nice: -21 }),
      'gateway.nice:',
    ],
    ['a fractional nice value', (d) => (d.gateway = { nice: 2.5 }), 'gateway.nice:'],
    ['an odd RTP base port', (d) => (d.rtp = { portMin: 20001 }), 'rtp.portMin: must be even'],
    [
      'an inverted RTP range',
      (d) => (d.rtp = { portMin: 30000, portMax: 20000 }),
      'rtp.portMin: must not be above rtp.portMax',
    ],
    [
      'a SIP port inside the RTP range',
      (d) => (d.sip = { udpPort: 20010 }),
      'sip.udpPort: must be outside the RTP port range',
    ],
    [
      'HTTP and SIP TCP on one port',
      (d) => (d.http = { port: 5060 }),
      'sip.tcpPort: port already used by http.port',
    ],
    [
      'a listen address that is not an IP',
      (d) => (d.http = { listen: 'localhost' }),
      'http.listen:',
    ],
    [
      'a bad Redis URL',
      (d) => (d.redis = { url: 'http://x' }),
      'redis.url: must be a redis:// or rediss:// URL',
    ],
    ['an unknown log level', (d) => (d.log = { level: 'loud' }), 'log.level:'],
    [
      'a tenant id with a colon',
      (d) => (tenant(d).id = 'a:b'),
      'tenants[0].id: must start with a letter',
    ],
    [
      'a number that is not dialable',
      (d) => (tenant(d).numbers = ['12ab']),
      'tenants[0].numbers[0]: must be a dialable number',
    ],
    ['a tenant without numbers', (d) => (tenant(d).numbers = []), 'tenants[0].numbers:'],
    [
      'coalesce on a mutation',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', policy: 'coalesce' },
        }),
      'tenants[0].actions.refund.policy: coalesce is only allowed for read actions',
    ],
    [
      'an intent field that is not a plain name',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', intent: ['order.id'] },
        }),
      'tenants[0].actions.refund.intent[0]: must be a plain argument name',
    ],
    [
      'an intent field named twice',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', intent: ['order_id', 'order_id'] },
        }),
      'tenants[0].actions.refund.intent[1]: order_id is named twice',
    ],
    [
      'intent fields on a read',
      (d) =>
        (tenant(d).actions = {
          lookup: { kind: 'read', provider: 'bookings', intent: ['order_id'] },
        }),
      'tenants[0].actions.lookup.intent: only mutations declare intent fields',
    ],
    [
      'an empty intent',
      (d) =>
        (tenant(d).actions = { refund: { kind: 'mutation', provider: 'bookings', intent: [] } }),
      'tenants[0].actions.refund.intent:',
    ],
    [
      'degrade without a fallback',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', policy: 'degrade' },
        }),
      'tenants[0].actions.refund.fallback: the degrade policy needs a fallback',
    ],
    [
      'an unknown policy',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', policy: 'shed' },
        }),
      'tenants[0].actions.refund.policy:',
    ],
    [
      'an unknown action kind',
      (d) => (tenant(d).actions = { refund: { kind: 'write', provider: 'bookings' } }),
      'tenants[0].actions.refund.kind:',
    ],
    [
      'an action on an unknown provider',
      (d) => (tenant(d).actions = { refund: { kind: 'mutation', provider: 'bank' } }),
      'tenants[0].actions.refund.provider: unknown provider bank',
    ],
    [
      'zero concurrency',
      (d) =>
        (tenant(d).actions = {
          refund: { kind: 'mutation', provider: 'bookings', maxConcurrent: 0 },
        }),
      'tenants[0].actions.refund.maxConcurrent:',
    ],
    [
      'a negative queue bound',
      (d) =>
        (tenant(d).actions = { refund: { kind: 'mutation', provider: 'bookings', maxQueued: -1 } }),
      'tenants[0].actions.refund.maxQueued:',
    ],
    [
      'an admission deadline beyond the operation deadline',
      (d) =>
        (tenant(d).actions = {
          refund: {
            kind: 'mutation',
            provider: 'bookings',
            admissionDeadlineMs: 9000,
            deadlineMs: 1000,
          },
        }),
      'tenants[0].actions.refund.admissionDeadlineMs: must not be above deadlineMs',
    ],
    [
      'a base backoff above the cap',
      (d) =>
        (tenant(d).actions = {
          refund: {
            kind: 'mutation',
            provider: 'bookings',
            retry: { backoffMs: 900, maxBackoffMs: 100 },
          },
        }),
      'tenants[0].actions.refund.retry.backoffMs: must not be above retry.maxBackoffMs',
    ],
    ['retention under 7 days', (d) => (d.ledger = { retentionDays: 3 }), 'ledger.retentionDays:'],
    [
      'a dead threshold under three heartbeats',
      (d) => (d.gateway = { heartbeatMs: 2000, deadAfterMs: 5000 }),
      'gateway.deadAfterMs: must be at least 3 times gateway.heartbeatMs',
    ],
    [
      'a stall cut at or past the point a janitor may take results over',
      (d) => {
        d.gateway = { heartbeatMs: 500, deadAfterMs: 3000 };
        d.rtp = { stallCutMs: 2500 };
      },
      'rtp.stallCutMs: must be below gateway.deadAfterMs - gateway.heartbeatMs (2500)',
    ],
    [
      'a bad allowlist entry',
      (d) => (tenant(d).trunk = { allowFrom: ['10.0.0.0/40'] }),
      'tenants[0].trunk.allowFrom[0]: must be an IPv4 or IPv6',
    ],
    [
      'a digest password in the file',
      (d) =>
        (tenant(d).trunk = {
          digest: { realm: 'r', username: 'u', password: 'p', passwordEnv: 'P' },
        }),
      'tenants[0].trunk.digest.password: unknown key',
    ],
    [
      'a webhook without a secret',
      (d) => (tenant(d).notify = { webhookUrl: 'https://example.invalid/hook' }),
      'tenants[0].notify.webhookSecretEnv: a webhook needs a signing secret',
    ],
    [
      'a transfer target that is not a URI',
      (d) => (tenant(d).transferTarget = 'frontdesk'),
      'tenants[0].transferTarget:',
    ],
    [
      'a sandbox url beside the embedded sandbox',
      (d) => (d.sandbox = { enabled: true, url: 'http://127.0.0.1:8090' }),
      'sandbox.url: names a sandbox running elsewhere',
    ],
    [
      'a sandbox url that is not http',
      (d) => (d.sandbox = { enabled: false, url: 'ftp://127.0.0.1/' }),
      'sandbox.url:',
    ],
    [
      'an unknown sandbox service',
      (d) => (d.providers = { bookings: { type: 'sandbox', service: 'flights' } }),
      'providers.bookings.service:',
    ],
    [
      'an http provider without its idempotency declaration',
      (d) => (d.providers = { bookings: { type: 'http', baseUrl: 'http://127.0.0.1:1' } }),
      'providers.bookings.honoursIdempotencyKeys:',
    ],
  ];

  it.each(cases)('should name the path for %s', (_name, mutate, expected) => {
    const document = base();
    mutate(document);
    const problems = problemsOf(document);
    expect(
      problems.some((p) => p.includes(expected)),
      `problems were:\n${problems.join('\n')}`,
    ).toBe(true);
  });

  it('should refuse a number owned by two tenants, naming both', () => {
    const document = base();
    (document.tenants as unknown[]).push({
      id: 'other',
      numbers: ['2000', '1000'],
      agent: 'concierge',
      trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
    });
    expect(problemsOf(document)).toContain(
      'tenants[1].numbers[1]: number 1000 is already owned by tenants[0]',
    );
  });

  it('should refuse duplicate tenant ids', () => {
    const document = base();
    (document.tenants as unknown[]).push({
      id: 'demo',
      numbers: ['2000'],
      agent: 'concierge',
      trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
    });
    expect(problemsOf(document)).toContain(
      'tenants[1].id: duplicate tenant id demo (also tenants[0])',
    );
  });

  it('should list every problem at once, not only the first', () => {
    const document = base();
    document.http = { port: 70000 };
    tenant(document).actions = {
      refund: { kind: 'mutation', provider: 'bookings', policy: 'coalesce' },
    };
    tenant(document).numbers = ['x'];
    const problems = problemsOf(document);
    expect(problems.length).toBeGreaterThanOrEqual(2);
    expect(problems.some((p) => p.startsWith('http.port:'))).toBe(true);
    expect(problems.some((p) => p.startsWith('tenants[0].numbers[0]:'))).toBe(true);
  });
});

describe('when the environment overrides settings', () => {
  it('should take REDIS_URL and the short forms', () => {
    const config = loadConfig({
      document: base(),
      env: {
        REDIS_URL: 'redis://127.0.0.1:6400',
        CALLGATE_HTTP_PORT: '9090',
        CALLGATE_LOG_LEVEL: 'debug',
        CALLGATE_SIP_PORT: '5070',
      },
    });
    expect(config.redis.url).toBe('redis://127.0.0.1:6400');
    expect(config.http.port).toBe(9090);
    expect(config.log.level).toBe('debug');
    expect(config.sip.udpPort).toBe(5070);
  });

  it('should take generic CALLGATE__section__key overrides with typed values', () => {
    const config = loadConfig({
      document: base(),
      env: {
        CALLGATE__sip__transports: '["udp"]',
        CALLGATE__rtp__comfortSilence: 'true',
        CALLGATE__gateway__drainMs: '1500',
      },
    });
    expect(config.sip.transports).toEqual(['udp']);
    expect(config.rtp.comfortSilence).toBe(true);
    expect(config.gateway.drainMs).toBe(1500);
  });

  it('should validate overridden values like file values', () => {
    expect(
      problemsOf(base(), { CALLGATE_HTTP_PORT: '99999' }).some((p) => p.startsWith('http.port:')),
    ).toBe(true);
    expect(problemsOf(base(), { CALLGATE__nope__x: '1' })).toContain('nope: unknown key');
  });

  it('should report an override that descends into a value', () => {
    const document = { ...base(), log: { level: 'info' } };
    expect(problemsOf(document, { CALLGATE__log__level__x: '1' })).toContain(
      'CALLGATE__log__level__x: log.level is not a section',
    );
  });
});

describe('when the configuration file cannot be used', () => {
  it('should report a missing file', () => {
    expect(() => loadConfig({ path: '/nonexistent/callgate.yaml', env: {} })).toThrow(
      /cannot read the file: ENOENT/,
    );
  });
});
